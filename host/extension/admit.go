package extension

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/admission"
	"github.com/wasmlet/wasmlet/host/plugin"
)

// Admitters returns the admission plugins serving now, in manifest order, as
// admission.Admitters named after the plugins. It is meant for
// admission.Config.Extra, which asks at every admission: the returned
// admitters share one encoding of the request, made by the first that needs
// it, so a chain of several plugins marshals the pod once.
func (e *Extension) Admitters() []admission.Admitter {
	ps := e.mgr.Admitters()
	if len(ps) == 0 {
		return nil
	}
	req := &request{}
	out := make([]admission.Admitter, len(ps))
	for i, p := range ps {
		out[i] = &admitter{e: e, p: p, req: req}
	}
	return out
}

// request is an admission request encoded once for several plugins.
type request struct {
	once  sync.Once
	attrs admission.Attributes
	req   abi.AdmitRequest
	err   error
}

func (r *request) encode(attrs admission.Attributes) (*abi.AdmitRequest, error) {
	r.once.Do(func() {
		r.attrs = attrs
		r.req, r.err = encodeAdmit(attrs)
	})
	if r.attrs.Pod != attrs.Pod || r.attrs.Node != attrs.Node || len(r.attrs.Pods) != len(attrs.Pods) {
		// Not the admission this set of admitters was made for.
		req, err := encodeAdmit(attrs)
		return &req, err
	}
	return &r.req, r.err
}

func encodeAdmit(attrs admission.Attributes) (abi.AdmitRequest, error) {
	var req abi.AdmitRequest
	var err error
	if req.Pod, err = json.Marshal(attrs.Pod); err != nil {
		return req, fmt.Errorf("encode pod: %w", err)
	}
	if attrs.Node != nil {
		if req.Node, err = json.Marshal(attrs.Node); err != nil {
			return req, fmt.Errorf("encode node: %w", err)
		}
	}
	req.PodsOnNode = make([]json.RawMessage, 0, len(attrs.Pods))
	for _, p := range attrs.Pods {
		b, err := json.Marshal(p)
		if err != nil {
			return req, fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		req.PodsOnNode = append(req.PodsOnNode, b)
	}
	return req, nil
}

// admitter is one admission plugin as an admission.Admitter.
type admitter struct {
	e   *Extension
	p   *plugin.Plugin
	req *request
}

// Name is the plugin's name: the chain names it in rejections and metrics.
func (a *admitter) Name() string { return a.p.Name() }

// Admit asks the plugin. A failed call follows the plugin's failure policy:
// Fail returns the error (the chain rejects with reason AdmissionError and a
// message naming the plugin and the failure), Ignore admits.
func (a *admitter) Admit(ctx context.Context, attrs admission.Attributes) (admission.Result, error) {
	req, err := a.req.encode(attrs)
	if err != nil {
		return admission.Result{}, fmt.Errorf("plugin %q: %w", a.p.Name(), err)
	}
	p, resp, err := retryClosed(a.e, a.p, func(p *plugin.Plugin) (*abi.AdmitResponse, error) { return p.Admit(ctx, req) })
	if err != nil {
		if a.e.failed(p, abi.KindAdmission, "admit "+podName(attrs.Pod), err) {
			return admission.Result{}, err
		}
		return admission.Result{Admit: true}, nil
	}
	if resp.Allowed {
		return admission.Result{Admit: true}, nil
	}
	a.e.log.Info("admission plugin denied a pod", "plugin", p.Name(), "version", p.Manifest().Version, "pod", podName(attrs.Pod), "reason", resp.Reason, "message", resp.Message)
	return admission.Result{Reason: resp.Reason, Message: resp.Message}, nil
}

func podName(p *v1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Namespace + "/" + p.Name
}
