// Package extension connects the plugin host (host/internal/pluginhost) to
// the agent's core: source plugins become config.Sources of the pod merge,
// admission plugins join the admission chain after the built-ins as one
// admission.Group, hook plugins are the runtime's lifecycle Hooks, and
// /plugins shows every plugin's state and figures. It applies each plugin's
// failure policy; the plugin host only reports failures. It is also the one
// package that translates between the plugin ABI's types (package abi) and
// the core's own (config.Op, container.HookPoint, container.Adjustment).
//
// Every call looks the plugins up in the Manager afresh, so a hot reload (a
// new version dropped into the plugin directory) changes verdicts, pods and
// adjustments without a restart, and a refused replacement leaves the old
// version serving.
package extension

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// DefaultPollInterval is how often a source plugin is polled when neither
// its answer (nextPollMillis) nor its manifest (config pollInterval) says;
// the kubelet's --http-check-frequency default.
const DefaultPollInterval = 20 * time.Second

// PollIntervalKey is the manifest config key a source plugin's default poll
// interval is read from (a Go duration, e.g. "5s").
const PollIntervalKey = "pollInterval"

// Config configures an Extension.
type Config struct {
	// Manager holds the plugin directory's plugins. Required.
	Manager *pluginhost.Manager
	// NodeName is this node's name: source plugins' pods are static pods
	// named "<pod>-<node>".
	NodeName string
	// PollInterval is the source plugins' default poll interval; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Merge delivers the updates of a source plugin loaded after the agent
	// started (those present at start are Sources run by the pod config);
	// nil ignores late source plugins.
	Merge func(ctx context.Context, source string, u config.PodUpdate) error
	// ParallelAdmission calls the admission plugins of one admission all at
	// once instead of one after another (see Admitter): the chain's
	// latency becomes the slowest plugin's on idle cores, at the price of
	// CPU (the calls after a denial are wasted, and scheduling costs).
	ParallelAdmission bool
	// Recorder records the Warning event (reason MonitoredDenial) a
	// monitoring admission plugin's denial leaves on the pod; nil records
	// none (the log line and the metric remain).
	Recorder Recorder
	// Logger receives one line per failed call, ignored failure, monitored
	// denial and poll error; nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_plugin_failures_total,
	// wasmlet_admission_monitored_denials_total and the p50/p99 gauges;
	// nil registers nothing.
	Registerer prometheus.Registerer
}

// Recorder records Kubernetes Events about pods.
type Recorder interface {
	// Event records an event of eventType about pod.
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Extension is the glue between the plugin Manager and the agent. Create it
// with New.
type Extension struct {
	cfg      Config
	mgr      *pluginhost.Manager
	log      hclog.Logger
	failures *prometheus.CounterVec
	// monitored counts monitoring plugins' denials by plugin and reason.
	monitored *prometheus.CounterVec
	encode    encoder

	mu      sync.Mutex
	polling map[string]bool // source plugins with a poller
	changed chan struct{}   // the Manager's set changed since Run last looked
}

// New returns the Extension of cfg, registering its metrics.
func New(cfg Config) (*Extension, error) {
	if cfg.Manager == nil {
		return nil, errors.New("extension: Config.Manager is nil")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	e := &Extension{
		cfg: cfg, mgr: cfg.Manager, log: cfg.Logger, polling: map[string]bool{}, changed: make(chan struct{}, 1),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_plugin_failures_total",
			Help: "Failed plugin calls by plugin, kind and the policy applied (fail, ignore, keep: a source keeps its last good state, monitor: a monitoring admission plugin admits).",
		}, []string{"plugin", "kind", "policy"}),
		monitored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_admission_monitored_denials_total",
			Help: "Denials by admission plugins in monitor mode (the pods were admitted), by plugin and the plugin's reason.",
		}, []string{"plugin", "reason"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{e.failures, e.monitored, &quantiles{m: cfg.Manager}} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("extension: register metrics: %w", err)
			}
		}
	}
	// Before Run lists the source plugins for the first time, so that no
	// plugin loaded after that listing goes unseen.
	cfg.Manager.OnChange(func() {
		select {
		case e.changed <- struct{}{}:
		default:
		}
	})
	return e, nil
}

// Run starts a poller for every source plugin that appears after start (a
// plugin dropped into the directory later) until ctx is done: it looks at
// the Manager's source plugins once, then again after each change of the
// Manager's set (New registered for them). The Manager itself is run by its
// owner.
func (e *Extension) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if e.cfg.Merge != nil {
			for _, p := range e.mgr.Sources() {
				name := p.Name()
				if !e.claim(name) {
					continue
				}
				e.log.Info("source plugin appeared; polling it", "plugin", name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					e.poll(ctx, name, func(u config.PodUpdate) bool { return e.cfg.Merge(ctx, name, u) == nil })
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-e.changed:
		}
	}
}

// claim marks a source plugin as polled; false if it already was.
func (e *Extension) claim(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.polling[name] {
		return false
	}
	e.polling[name] = true
	return true
}

// failed applies p's failure policy to a failed call of kind k and reports
// whether the caller must fail (policy Fail). It logs and counts either way.
// A plugin in monitor mode never fails its caller, whatever its policy.
func (e *Extension) failed(p *pluginhost.Plugin, k abi.Kind, what string, err error) bool {
	if monitoring(p) {
		e.failures.WithLabelValues(p.Name(), string(k), "monitor").Inc()
		e.log.Warn("plugin call failed; ignored (mode monitor)", "plugin", p.Name(), "kind", k, "call", what, "error", err)
		return false
	}
	if p.Manifest().FailurePolicy == abi.FailurePolicyIgnore {
		e.failures.WithLabelValues(p.Name(), string(k), "ignore").Inc()
		e.log.Warn("plugin call failed; ignored (failurePolicy Ignore)", "plugin", p.Name(), "kind", k, "call", what, "error", err)
		return false
	}
	e.failures.WithLabelValues(p.Name(), string(k), "fail").Inc()
	e.log.Error("plugin call failed (failurePolicy Fail)", "plugin", p.Name(), "kind", k, "call", what, "error", err)
	return true
}

// firstLine is err as a pod's status shows it: its first line only. A
// guest's fault can carry a long trace (a Go guest's runtime stack on a
// memory-cap failure runs to a thousand characters); failed logs it whole.
// errors.Is and As still see err.
func firstLine(err error) error {
	if msg := err.Error(); strings.Contains(msg, "\n") {
		return &firstLineError{line: strings.TrimSpace(msg[:strings.IndexByte(msg, '\n')]) + " (the rest in the agent's log)", err: err}
	}
	return err
}

// firstLineError shows the first line of err.
type firstLineError struct {
	line string
	err  error
}

func (f *firstLineError) Error() string { return f.line }
func (f *firstLineError) Unwrap() error { return f.err }

// retryClosed runs call on p, once more on the serving version of p's name
// if p was replaced (closed) meanwhile.
func retryClosed[T any](e *Extension, p *pluginhost.Plugin, call func(*pluginhost.Plugin) (T, error)) (*pluginhost.Plugin, T, error) {
	r, err := call(p)
	if errors.Is(err, pluginhost.ErrClosed) {
		if q := e.mgr.Get(p.Name()); q != nil && q != p {
			p = q
			r, err = call(p)
		}
	}
	return p, r, err
}
