package extension

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/plugin"
)

// Admitters returns the admission plugins serving now, in manifest order, as
// admission.Admitters named after the plugins. It is meant for
// admission.Config.Extra, which asks at every admission. The returned
// admitters belong to one admission: the first one asked encodes the
// request once for all. With Config.ParallelAdmission it also calls every
// plugin of the set at once, and each admitter then answers with its own
// plugin's result, so the chain keeps its order (the first denial in
// manifest order wins) while its latency is that of the slowest plugin
// rather than the sum of all.
func (e *Extension) Admitters() []admission.Admitter {
	ps := e.mgr.Admitters()
	if len(ps) == 0 {
		return nil
	}
	r := &round{e: e, plugins: ps, results: make([]result, len(ps)), parallel: e.cfg.ParallelAdmission}
	out := make([]admission.Admitter, len(ps))
	for i, p := range ps {
		r.results[i].done = make(chan struct{})
		out[i] = &admitter{round: r, i: i, p: p}
	}
	return out
}

// round is one admission asked of a set of plugins.
type round struct {
	e        *Extension
	plugins  []*plugin.Plugin
	parallel bool
	once     sync.Once
	attrs    admission.Attributes
	req      abi.AdmitRequest
	err      error
	results  []result
}

// result is one plugin's answer in a round.
type result struct {
	done chan struct{}
	p    *plugin.Plugin // the version that answered
	resp *abi.AdmitResponse
	err  error
}

// start encodes the request once per round and, when parallel, calls every
// plugin.
func (r *round) start(ctx context.Context, attrs admission.Attributes) {
	r.once.Do(func() {
		r.attrs = attrs
		r.req, r.err = r.e.encode.admit(attrs)
		if !r.parallel {
			return
		}
		for i, p := range r.plugins {
			res := &r.results[i]
			if r.err != nil {
				res.p, res.err = p, r.err
				close(res.done)
				continue
			}
			go func() {
				defer close(res.done)
				res.p, res.resp, res.err = admit(ctx, r.e, p, &r.req)
			}()
		}
	})
}

func admit(ctx context.Context, e *Extension, p *plugin.Plugin, req *abi.AdmitRequest) (*plugin.Plugin, *abi.AdmitResponse, error) {
	return retryClosed(e, p, func(p *plugin.Plugin) (*abi.AdmitResponse, error) { return p.Admit(ctx, req) })
}

// same reports whether attrs are the admission the round was started for.
func (r *round) same(attrs admission.Attributes) bool {
	return r.attrs.Pod == attrs.Pod && r.attrs.Node == attrs.Node && len(r.attrs.Pods) == len(attrs.Pods)
}

// encoder encodes admission requests, keeping the JSON of the pods already
// on the node from one admission to the next: the agent hands the pod
// manager's own objects, which it replaces rather than changes, so a pod
// whose pointer is the same encodes the same. Without it a burst of n new
// pods marshals n²/2 pods.
type encoder struct {
	mu    sync.Mutex
	cache map[*v1.Pod]json.RawMessage
}

// admit encodes attrs; the pods on the node come from the cache when they
// were encoded for an earlier admission.
func (c *encoder) admit(attrs admission.Attributes) (abi.AdmitRequest, error) {
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
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[*v1.Pod]json.RawMessage, len(attrs.Pods))
	req.PodsOnNode = make([]json.RawMessage, 0, len(attrs.Pods))
	for _, p := range attrs.Pods {
		b, ok := c.cache[p]
		if !ok {
			if b, err = json.Marshal(p); err != nil {
				return req, fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		next[p] = b
		req.PodsOnNode = append(req.PodsOnNode, b)
	}
	// The pod admitted now is on the node at the next admission.
	next[attrs.Pod] = req.Pod
	c.cache = next
	return req, nil
}

// admitter is one admission plugin of a round as an admission.Admitter.
type admitter struct {
	round *round
	i     int
	p     *plugin.Plugin
}

// Name is the plugin's name: the chain names it in rejections and metrics.
func (a *admitter) Name() string { return a.p.Name() }

// Admit answers with the plugin's verdict. A failed call follows the
// plugin's failure policy: Fail returns the error (the chain rejects with
// reason AdmissionError and a message naming the plugin and the failure),
// Ignore admits.
func (a *admitter) Admit(ctx context.Context, attrs admission.Attributes) (admission.Result, error) {
	e := a.round.e
	a.round.start(ctx, attrs)
	var res result
	switch {
	case a.round.same(attrs) && !a.round.parallel:
		if a.round.err != nil {
			return admission.Result{}, fmt.Errorf("plugin %q: %w", a.p.Name(), a.round.err)
		}
		res.p, res.resp, res.err = admit(ctx, e, a.p, &a.round.req)
	case a.round.same(attrs):
		select {
		case <-a.round.results[a.i].done:
			res = a.round.results[a.i]
		case <-ctx.Done():
			return admission.Result{}, fmt.Errorf("plugin %q: %w", a.p.Name(), ctx.Err())
		}
	default:
		// Asked about another pod than the round's: call on its own.
		req, err := e.encode.admit(attrs)
		if err != nil {
			return admission.Result{}, fmt.Errorf("plugin %q: %w", a.p.Name(), err)
		}
		res.p, res.resp, res.err = admit(ctx, e, a.p, &req)
	}
	if res.err != nil {
		if e.failed(res.p, abi.KindAdmission, "admit "+podName(attrs.Pod), res.err) {
			return admission.Result{}, res.err
		}
		return admission.Result{Admit: true}, nil
	}
	if res.resp.Allowed {
		return admission.Result{Admit: true}, nil
	}
	e.log.Info("admission plugin denied a pod", "plugin", res.p.Name(), "version", res.p.Manifest().Version, "pod", podName(attrs.Pod), "reason", res.resp.Reason, "message", res.resp.Message)
	return admission.Result{Reason: res.resp.Reason, Message: res.resp.Message}, nil
}

func podName(p *v1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Namespace + "/" + p.Name
}
