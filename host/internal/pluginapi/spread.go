package pluginapi

import (
	"fmt"
	"hash/fnv"
	"time"

	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
)

// Delay is where a node's turn falls in a rollout spread over spread: a
// fixed fraction of the window from a hash of the node's and the plugin's
// names, so every node of a fleet lands at its own place, the same on
// every change and after a restart, and different plugins pick different
// early nodes. 0 when spread is not positive.
func Delay(node, plugin string, spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(plugin))
	return time.Duration(h.Sum64() % uint64(spread))
}

// spreadOf is p's rollout spread; an error names the field.
func spreadOf(p *pluginsv1.WasmletPlugin) (time.Duration, error) {
	if p.Spec.Rollout == nil {
		return 0, nil
	}
	d := p.Spec.Rollout.Spread.Duration
	if d < 0 {
		return 0, fmt.Errorf("WasmletPlugin %s: spec.rollout.spread %s: must not be negative", p.Name, d)
	}
	return d, nil
}

// turn decides whether a change of the plugin named name, which the node
// has not taken up yet, is due now under spread: once the node's delay has
// passed since it first saw a change still pending (a change made while
// one waits keeps the first one's start, so a plugin changed often still
// lands). It returns the time it waits for when not due. pending is Run's
// own; no lock is held.
func (f *Follower) turn(name string, spread time.Duration, now time.Time) (time.Time, bool) {
	since, ok := f.pending[name]
	if !ok {
		since = now
		f.pending[name] = now
	}
	due := since.Add(Delay(f.cfg.NodeName, name, spread))
	if now.Before(due) {
		return due, false
	}
	return time.Time{}, true
}

// wakeAt makes Run look again at the earliest of the waiting turns (the
// Recheck ticker would, later); a zero time cancels.
func (f *Follower) wakeAt(waiting map[string]time.Time) {
	var first time.Time
	for _, t := range waiting {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if f.wake != nil {
		f.wake.Stop()
		f.wake = nil
	}
	if first.IsZero() {
		return
	}
	d := first.Sub(f.cfg.Now())
	if d < 0 {
		d = 0
	}
	f.wake = time.AfterFunc(d, f.Kick)
}
