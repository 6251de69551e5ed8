package pluginhost

import (
	"errors"
	"math"
	"sync"
	"time"
)

// LatencyBuckets are the upper bounds of Stats.Latency's buckets, 1 µs to
// ~16 s in powers of two.
var LatencyBuckets = func() []time.Duration {
	var b []time.Duration
	for d := time.Microsecond; d <= 16*time.Second; d *= 2 {
		b = append(b, d)
	}
	return b
}()

// Stats is a snapshot of one plugin's call figures since it was loaded.
type Stats struct {
	// Calls counts every call, failed ones included.
	Calls uint64
	// Errors counts failed calls (timeouts included) and responses whose
	// error field was set.
	Errors uint64
	// Timeouts counts calls stopped by their deadline.
	Timeouts uint64
	// Latency counts calls per LatencyBuckets bucket; the last element
	// counts calls slower than the last bound.
	Latency []uint64
	// LatencySum is the total time spent in calls.
	LatencySum time.Duration
	// Instantiations counts instances created (a failed call's instance is
	// discarded, so the next call instantiates afresh).
	Instantiations uint64
	// LogLinesDropped counts guest log lines over the log budget.
	LogLinesDropped uint64
	// Unloads counts the times the plugin, idle, gave back its instances and
	// compiled code (Config.IdleTimeout); Reloads the times a call then
	// reloaded the code.
	Unloads, Reloads uint64
}

// Quantile estimates the q-quantile (0 < q ≤ 1) of call latency as the upper
// bound of the bucket that holds it; 0 without calls.
func (s Stats) Quantile(q float64) time.Duration {
	var total uint64
	for _, c := range s.Latency {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range s.Latency {
		seen += c
		if seen >= rank {
			if i < len(LatencyBuckets) {
				return LatencyBuckets[i]
			}
			break
		}
	}
	return time.Duration(math.MaxInt64)
}

type stats struct {
	mu   sync.Mutex
	s    Stats
	last time.Duration // mono() when the last call ended (or the plugin loaded)
}

func newStats() *stats {
	return &stats{s: Stats{Latency: make([]uint64, len(LatencyBuckets)+1)}}
}

// record counts a call that ran from start to end (mono()).
func (st *stats) record(start, end time.Duration, err error) {
	d := end - start
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	st.mu.Lock()
	st.last = end
	st.s.Calls++
	st.s.Latency[i]++
	st.s.LatencySum += d
	if err != nil {
		st.s.Errors++
		if errors.Is(err, ErrTimeout) {
			st.s.Timeouts++
		}
	}
	st.mu.Unlock()
}

func (st *stats) countError() {
	st.mu.Lock()
	st.s.Errors++
	st.mu.Unlock()
}

func (st *stats) logDropped(n int) {
	st.mu.Lock()
	st.s.LogLinesDropped += uint64(n)
	st.mu.Unlock()
}

func (st *stats) instantiated() {
	st.mu.Lock()
	st.s.Instantiations++
	st.mu.Unlock()
}

// add adds the figures of s (a replaced plugin's) to st.
func (st *stats) add(s Stats) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Calls += s.Calls
	st.s.Errors += s.Errors
	st.s.Timeouts += s.Timeouts
	st.s.LatencySum += s.LatencySum
	st.s.Instantiations += s.Instantiations
	st.s.LogLinesDropped += s.LogLinesDropped
	st.s.Unloads += s.Unloads
	st.s.Reloads += s.Reloads
	for i := range min(len(st.s.Latency), len(s.Latency)) {
		st.s.Latency[i] += s.Latency[i]
	}
}

// touch sets the time of the last call (at load: the plugin is not idle).
func (st *stats) touch(now time.Duration) {
	st.mu.Lock()
	st.last = now
	st.mu.Unlock()
}

// lastCall is when the last call ended.
func (st *stats) lastCall() time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.last
}

func (st *stats) unloaded() {
	st.mu.Lock()
	st.s.Unloads++
	st.mu.Unlock()
}

func (st *stats) reloaded() {
	st.mu.Lock()
	st.s.Reloads++
	st.mu.Unlock()
}

func (st *stats) snapshot() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.Latency = append([]uint64(nil), st.s.Latency...)
	return s
}

// Stats returns the plugin's call figures.
func (p *Plugin) Stats() Stats { return p.stats.snapshot() }
