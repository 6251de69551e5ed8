// Package pacer paces pod starts to what the container runtime absorbs: an
// adaptive limit on the pods being started at once, raised while starts
// take about as long as the fastest recent ones and cut when they take
// much longer (additive increase, multiplicative decrease on latency, as
// TCP Vegas or Netflix's concurrency limits). A burst of pods then runs
// a few at a time, oldest first, each to the end of its start, instead of
// every sandbox being asked for at once while the runtime thrashes.
package pacer

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Pacer; zero fields take the defaults.
type Config struct {
	// Initial is the limit before any start was timed (default 4); it
	// grows by one per start on time until the first slow one (slow
	// start), then by one per limit's worth of starts.
	Initial int
	// Min and Max bound the limit (defaults 2 and 256).
	Min, Max int
	// Tolerance: a start slower than Tolerance × the fastest of the last
	// Window starts means the runtime is queueing (default 2).
	Tolerance float64
	// Window is how many recent starts the baseline is the fastest of
	// (default 64): a runtime that became slower for good is relearnt.
	Window int
	// Backoff multiplies the limit after a slow start (default 0.75), at
	// most once per round of the starts that were under way.
	Backoff float64
	// MaxHold gives a slot back when a start holds it longer (default
	// 10 s, untimed): an image pull or a postStart hook of one pod does not
	// hold the others back.
	MaxHold time.Duration
	// Registerer receives the pacer's gauges; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Pacer hands out start slots. It is safe for concurrent use.
type Pacer struct {
	cfg Config

	mu       sync.Mutex
	limit    float64
	inflight int
	queue    []*waiter       // FIFO
	samples  []time.Duration // ring of the last Window start times
	next     int             // ring position
	slow     bool            // slow start is over
	// After a cut, the starts already under way report the old congestion:
	// no cut again until ignore more starts have finished.
	ignore int

	limitG, inflightG, waitingG prometheus.Gauge
}

type waiter struct {
	ready chan struct{}
	slot  *Slot
}

// Slot is a start's permission to run; Done gives it back.
type Slot struct {
	p       *Pacer
	granted time.Time
	once    sync.Once
	timer   *time.Timer
}

// New returns a Pacer, registering wasmlet_pod_start_limit,
// wasmlet_pod_starts_inflight and wasmlet_pod_starts_waiting.
func New(cfg Config) (*Pacer, error) {
	if cfg.Initial <= 0 {
		cfg.Initial = 4
	}
	if cfg.Min <= 0 {
		cfg.Min = 2
	}
	if cfg.Max <= 0 {
		cfg.Max = 256
	}
	if cfg.Max < cfg.Min {
		return nil, fmt.Errorf("pacer: Max %d below Min %d", cfg.Max, cfg.Min)
	}
	if cfg.Tolerance <= 1 {
		cfg.Tolerance = 2
	}
	if cfg.Window <= 0 {
		cfg.Window = 64
	}
	if cfg.Backoff <= 0 || cfg.Backoff >= 1 {
		cfg.Backoff = 0.75
	}
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = 10 * time.Second
	}
	p := &Pacer{
		cfg:       cfg,
		limit:     float64(min(max(cfg.Initial, cfg.Min), cfg.Max)),
		limitG:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmlet_pod_start_limit", Help: "How many pods may be started at once (adaptive)."}),
		inflightG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmlet_pod_starts_inflight", Help: "Pods being started."}),
		waitingG:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmlet_pod_starts_waiting", Help: "Pods waiting for a start slot."}),
	}
	p.limitG.Set(p.limit)
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{p.limitG, p.inflightG, p.waitingG} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("pacer: register metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Limit is the current limit.
func (p *Pacer) Limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.limit)
}

// Acquire waits for a slot, first come first served, until ctx ends.
func (p *Pacer) Acquire(ctx context.Context) (*Slot, error) {
	p.mu.Lock()
	if len(p.queue) == 0 && p.inflight < int(p.limit) {
		s := p.grantLocked()
		p.mu.Unlock()
		return s, nil
	}
	w := &waiter{ready: make(chan struct{})}
	p.queue = append(p.queue, w)
	p.waitingG.Set(float64(len(p.queue)))
	p.mu.Unlock()
	select {
	case <-w.ready:
		return w.slot, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	for i, q := range p.queue {
		if q == w {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			p.waitingG.Set(float64(len(p.queue)))
			p.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	p.mu.Unlock()
	// Granted as ctx ended: pass the slot on, untimed.
	w.slot.Done(false)
	return nil, ctx.Err()
}

// grantLocked takes a slot; p.mu is held.
func (p *Pacer) grantLocked() *Slot {
	p.inflight++
	p.inflightG.Set(float64(p.inflight))
	s := &Slot{p: p, granted: time.Now()}
	s.timer = time.AfterFunc(p.cfg.MaxHold, func() { s.Done(false) })
	return s
}

// Done gives the slot back; timed says whether the start's duration is a
// sample of the runtime's latency (a start that failed early is not).
// Only the first call counts.
func (s *Slot) Done(timed bool) {
	if s == nil {
		return
	}
	s.once.Do(func() {
		p := s.p
		p.mu.Lock()
		defer p.mu.Unlock()
		s.timer.Stop() // set under p.mu by grantLocked
		p.inflight--
		if timed {
			p.sampleLocked(time.Since(s.granted))
		}
		for len(p.queue) > 0 && p.inflight < int(p.limit) {
			w := p.queue[0]
			p.queue = p.queue[1:]
			w.slot = p.grantLocked()
			close(w.ready)
		}
		p.inflightG.Set(float64(p.inflight))
		p.waitingG.Set(float64(len(p.queue)))
	})
}

// sampleLocked adapts the limit to one start's duration d.
func (p *Pacer) sampleLocked(d time.Duration) {
	if len(p.samples) < p.cfg.Window {
		p.samples = append(p.samples, d)
	} else {
		p.samples[p.next] = d
		p.next = (p.next + 1) % p.cfg.Window
	}
	base := time.Duration(math.MaxInt64)
	for _, s := range p.samples {
		base = min(base, s)
	}
	if p.ignore > 0 {
		p.ignore--
	}
	switch {
	case float64(d) > p.cfg.Tolerance*float64(base):
		p.slow = true
		if p.ignore == 0 {
			p.limit = max(float64(p.cfg.Min), p.limit*p.cfg.Backoff)
			p.ignore = p.inflight
		}
	case !p.slow:
		p.limit = min(float64(p.cfg.Max), p.limit+1)
	default:
		p.limit = min(float64(p.cfg.Max), p.limit+1/p.limit)
	}
	p.limitG.Set(p.limit)
}
