// Package admission decides whether this node runs a pod, like the kubelet's
// lifecycle.PodAdmitHandler chain: an ordered list of Admitters, the first
// rejection wins, and a result names the admitter that gave it. The
// built-ins are max pods, resource fit and host-port conflicts; the Wasm
// admission plugins are one more Admitter, a Group whose members (the
// plugins) the chain names and counts one by one.
package admission

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
	v1 "k8s.io/api/core/v1"
)

// Attributes is what an admitter sees: the pod, the node and the pods
// already admitted to the node (the pod itself excluded).
type Attributes struct {
	// Pod is the pod asking to run.
	Pod *v1.Pod
	// Node is this node, with capacity and allocatable.
	Node *v1.Node
	// Pods are the pods already admitted and not yet terminated.
	Pods []*v1.Pod
}

// Result is the kubelet's PodAdmitResult plus the name of the admitter that
// produced it.
type Result struct {
	// Admit is true when the pod may run.
	Admit bool
	// Reason is a CamelCase reason for a rejection (e.g. "OutOfcpu").
	Reason string
	// Message is a human-readable explanation of a rejection.
	Message string
	// Admitter names the admitter that rejected the pod; empty when admitted.
	Admitter string
}

// Admitter is one admission check.
type Admitter interface {
	// Name names the admitter in results, logs and metrics.
	Name() string
	// Admit decides on attrs. An error means the admitter could not decide;
	// the chain rejects the pod with reason "AdmissionError" (a plugin with
	// failure policy "ignore" returns an admitting result instead).
	Admit(ctx context.Context, attrs Attributes) (Result, error)
}

// Group is an Admitter that stands for several named admitters decided in
// one call: the Wasm admission plugins, which the group asks one after
// another or all at once, and which come and go with reloads. The chain
// asks a Group for AdmitEach instead of Admit and treats each Decision as
// the answer of an admitter of its own: a rejection or an error names the
// member, and wasmlet_admission_results_total counts per member.
type Group interface {
	Admitter
	// AdmitEach decides on attrs and returns its members' decisions in
	// member order, up to and including the first that does not admit (a
	// rejection or an error); none when it has no members.
	AdmitEach(ctx context.Context, attrs Attributes) []Decision
}

// Decision is one member's answer in a Group.
type Decision struct {
	// Admitter names the member.
	Admitter string
	// Result is the member's result; its Admitter field is not read.
	Result Result
	// Err, when not nil, means the member could not decide, as an error
	// returned by Admitter.Admit.
	Err error
}

// Config configures a Chain.
type Config struct {
	// Admitters run in this order; the first rejection stops the chain.
	Admitters []Admitter
	// Logger receives one debug line per rejection (the agent logs the
	// event); nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_admission_results_total; nil registers
	// nothing.
	Registerer prometheus.Registerer
}

// Chain is an ordered list of admitters. Create it with New; it is safe for
// concurrent use if its admitters are.
type Chain struct {
	admitters []Admitter
	log       hclog.Logger
	results   *prometheus.CounterVec
}

// New returns the chain of cfg, registering its metric.
func New(cfg Config) (*Chain, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	c := &Chain{
		admitters: append([]Admitter(nil), cfg.Admitters...),
		log:       cfg.Logger,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_admission_results_total",
			Help: "Admission decisions by admitter and result (admit, reject, error).",
		}, []string{"admitter", "result"}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c.results); err != nil {
			return nil, fmt.Errorf("admission: register metrics: %w", err)
		}
	}
	return c, nil
}

// Admit runs the admitters in order and returns the first rejection, or an
// admitting result when all admit. A rejection's message names the
// admitter (for a Group, the member).
func (c *Chain) Admit(ctx context.Context, attrs Attributes) Result {
	for _, a := range c.admitters {
		if g, ok := a.(Group); ok {
			for _, d := range g.AdmitEach(ctx, attrs) {
				if r, rejected := c.record(attrs, d); rejected {
					return r
				}
			}
			continue
		}
		r, err := a.Admit(ctx, attrs)
		if r, rejected := c.record(attrs, Decision{Admitter: a.Name(), Result: r, Err: err}); rejected {
			return r
		}
	}
	return Result{Admit: true}
}

// record counts d and reports whether it rejects the pod, with the
// chain's result naming the admitter when it does.
func (c *Chain) record(attrs Attributes, d Decision) (Result, bool) {
	name, r := d.Admitter, d.Result
	switch {
	case d.Err != nil:
		c.results.WithLabelValues(name, "error").Inc()
		r = Result{Reason: "AdmissionError", Message: fmt.Sprintf("admitter %s failed: %v", name, d.Err)}
	case r.Admit:
		c.results.WithLabelValues(name, "admit").Inc()
		return Result{}, false
	default:
		c.results.WithLabelValues(name, "reject").Inc()
		if r.Reason == "" {
			r.Reason = "Rejected"
		}
		r.Message = fmt.Sprintf("admitter %s: %s", name, r.Message)
	}
	r.Admit, r.Admitter = false, name
	c.log.Debug("pod rejected", "pod", podspec.Name(attrs.Pod), "admitter", name, "reason", r.Reason, "message", r.Message)
	return r, true
}
