// Package admission decides whether this node runs a pod, like the kubelet's
// lifecycle.PodAdmitHandler chain: an ordered list of Admitters, the first
// rejection wins, and a result names the admitter that gave it. The
// built-ins are max pods, resource fit and host-port conflicts; Wasm
// admission plugins implement the same Admitter interface.
package admission

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
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

// Config configures a Chain.
type Config struct {
	// Admitters run in this order; the first rejection stops the chain.
	Admitters []Admitter
	// Extra, when set, is asked at every Admit for admitters that run after
	// Admitters (the Wasm admission plugins, which come and go with
	// reloads).
	Extra func() []Admitter
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
	extra     func() []Admitter
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
		extra:     cfg.Extra,
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
// admitter.
func (c *Chain) Admit(ctx context.Context, attrs Attributes) Result {
	admitters := c.admitters
	if c.extra != nil {
		admitters = append(admitters[:len(admitters):len(admitters)], c.extra()...)
	}
	for _, a := range admitters {
		r, err := a.Admit(ctx, attrs)
		name := a.Name()
		switch {
		case err != nil:
			c.results.WithLabelValues(name, "error").Inc()
			r = Result{Reason: "AdmissionError", Message: fmt.Sprintf("admitter %s failed: %v", name, err)}
		case r.Admit:
			c.results.WithLabelValues(name, "admit").Inc()
			continue
		default:
			c.results.WithLabelValues(name, "reject").Inc()
			if r.Reason == "" {
				r.Reason = "Rejected"
			}
			r.Message = fmt.Sprintf("admitter %s: %s", name, r.Message)
		}
		r.Admit, r.Admitter = false, name
		c.log.Debug("pod rejected", "pod", podName(attrs.Pod), "admitter", name, "reason", r.Reason, "message", r.Message)
		return r
	}
	return Result{Admit: true}
}

func podName(p *v1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Namespace + "/" + p.Name
}
