package extension

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

// Admitter returns the admission plugins as one admission.Admitter, for the
// admission chain after the built-ins. It is an admission.Group: at every
// admission it looks up the plugins serving now (so reloads take effect
// between two pods), encodes the request once, asks the plugins in manifest
// order and returns their decisions up to the first that does not admit,
// each named after its plugin, so a rejection, an event and the chain's
// metric name the plugin. With Config.ParallelAdmission it calls every
// plugin at once and still takes the verdicts in manifest order (the first
// denial in that order wins), so its latency is the slowest plugin's rather
// than the sum of all. It keeps nothing from one admission to the next but
// the encoding of the pods on the node.
func (e *Extension) Admitter() admission.Group { return admitter{e} }

// admitterName is the name of Extension.Admitter as a whole; the chain
// names its plugins instead.
const admitterName = "plugins"

// admitter is the admission plugins as one admission.Group.
type admitter struct{ e *Extension }

// Name is "plugins", the set's name; the chain names each plugin instead.
func (a admitter) Name() string { return admitterName }

// Admit is the plugins' verdict on their own, folded as the chain does: the
// first rejection, its Admitter field naming the plugin, or an error naming
// the plugin that could not decide.
func (a admitter) Admit(ctx context.Context, attrs admission.Attributes) (admission.Result, error) {
	ds := a.AdmitEach(ctx, attrs)
	if len(ds) == 0 {
		return admission.Result{Admit: true}, nil
	}
	d := ds[len(ds)-1]
	switch {
	case d.Err != nil:
		return admission.Result{}, fmt.Errorf("admission plugin %s: %w", d.Admitter, d.Err)
	case d.Result.Admit:
		return admission.Result{Admit: true}, nil
	}
	r := d.Result
	r.Admitter = d.Admitter
	return r, nil
}

// AdmitEach asks the admission plugins serving now about attrs, in manifest
// order, one after another or (Config.ParallelAdmission) all at once, and
// returns their decisions up to and including the first that does not admit.
// A failed call follows the plugin's failure policy: Fail is an error
// decision (the chain rejects with reason AdmissionError and a message
// naming the plugin and the failure), Ignore admits. A plugin in monitor
// mode always admits (its denials are reported, its failures logged and
// counted), so the plugins after it still run and decide. The calls made after
// a denial in parallel mode are not looked at: neither counted nor logged.
func (a admitter) AdmitEach(ctx context.Context, attrs admission.Attributes) []admission.Decision {
	e := a.e
	ps := e.mgr.Admitters()
	if len(ps) == 0 {
		return nil
	}
	req, err := e.encode.admit(attrs)
	if err != nil {
		name := ps[0].Name()
		return []admission.Decision{{Admitter: name, Err: fmt.Errorf("plugin %q: %w", name, err)}}
	}
	out := make([]admission.Decision, 0, len(ps))
	if !e.cfg.ParallelAdmission {
		for _, p := range ps {
			d := e.decide(attrs, admit(ctx, e, p, &req))
			if out = append(out, d); d.Err != nil || !d.Result.Admit {
				break
			}
		}
		return out
	}
	answers := make([]chan answer, len(ps))
	for i, p := range ps {
		answers[i] = make(chan answer, 1) // a call after a denial ends unread
		go func() { answers[i] <- admit(ctx, e, p, &req) }()
	}
	for i, p := range ps {
		var d admission.Decision
		select {
		case ans := <-answers[i]:
			d = e.decide(attrs, ans)
		case <-ctx.Done():
			d = admission.Decision{Admitter: p.Name(), Err: fmt.Errorf("plugin %q: %w", p.Name(), ctx.Err())}
		}
		if out = append(out, d); d.Err != nil || !d.Result.Admit {
			break
		}
	}
	return out
}

// answer is one plugin's answer to an admission.
type answer struct {
	p    *pluginhost.Plugin // the version that answered
	resp *abi.AdmitResponse
	err  error
}

// admit calls p (its serving version if p was replaced meanwhile).
func admit(ctx context.Context, e *Extension, p *pluginhost.Plugin, req *abi.AdmitRequest) answer {
	p, resp, err := retryClosed(e, p, func(p *pluginhost.Plugin) (*abi.AdmitResponse, error) { return p.Admit(ctx, req) })
	return answer{p: p, resp: resp, err: err}
}

// MonitoredDenialReason is the reason of the Warning event a monitoring
// admission plugin's denial leaves on the pod it admits.
const MonitoredDenialReason = "MonitoredDenial"

// decide turns a plugin's answer into the chain's decision, applying the
// plugin's failure policy to a failed call and logging a denial. A plugin
// in monitor mode admits: its denial is reported (monitored), its failure
// logged and counted (failed).
func (e *Extension) decide(attrs admission.Attributes, a answer) admission.Decision {
	d := admission.Decision{Admitter: a.p.Name()}
	switch {
	case a.err != nil:
		if e.failed(a.p, abi.KindAdmission, "admit "+podspec.Name(attrs.Pod), a.err) {
			d.Err = firstLine(a.err)
		} else {
			d.Result.Admit = true
		}
	case a.resp.Allowed:
		d.Result.Admit = true
	case monitoring(a.p):
		e.reportMonitored(attrs.Pod, a)
		d.Result.Admit = true
	default:
		e.log.Info("admission plugin denied a pod", "plugin", a.p.Name(), "version", a.p.Manifest().Version, "pod", podspec.Name(attrs.Pod), "reason", a.resp.Reason, "message", a.resp.Message)
		d.Result = admission.Result{Reason: a.resp.Reason, Message: a.resp.Message}
	}
	return d
}

// monitoring reports whether p runs in monitor mode.
func monitoring(p *pluginhost.Plugin) bool {
	mf := p.Manifest()
	return mf.Monitoring()
}

// reportMonitored reports the denial of pod by a plugin in monitor mode,
// which admits it: a warn line, a Warning event on the pod naming the
// plugin and its reason, and wasmlet_admission_monitored_denials_total.
func (e *Extension) reportMonitored(pod *v1.Pod, a answer) {
	reason := a.resp.Reason
	if reason == "" {
		reason = "Rejected" // as the chain names a denial without a reason
	}
	e.monitored.WithLabelValues(a.p.Name(), reason).Inc()
	e.log.Warn("admission plugin in monitor mode denied a pod; admitted", "plugin", a.p.Name(), "version", a.p.Manifest().Version, "pod", podspec.Name(pod), "reason", reason, "message", a.resp.Message)
	if e.cfg.Recorder != nil {
		e.cfg.Recorder.Event(pod, v1.EventTypeWarning, MonitoredDenialReason,
			fmt.Sprintf("admission plugin %s (mode monitor) would deny the pod: %s: %s", a.p.Name(), reason, a.resp.Message))
	}
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
