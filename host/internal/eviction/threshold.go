package eviction

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/wasmlet/wasmlet/host/internal/allocatable"
)

// The node-pressure signals the manager observes, the kubelet's names.
const (
	SignalMemoryAvailable   = allocatable.SignalMemoryAvailable
	SignalNodeFsAvailable   = allocatable.SignalNodeFsAvailable
	SignalNodeFsInodesFree  = allocatable.SignalNodeFsInodesFree
	SignalImageFsAvailable  = allocatable.SignalImageFsAvailable
	SignalImageFsInodesFree = allocatable.SignalImageFsInodesFree
	SignalPIDAvailable      = allocatable.SignalPIDAvailable
)

// The resources a signal starves, the kubelet's names (inodes and pids
// are not resources of the API).
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalInfo is what a signal means: the condition it sets and the
// resource it starves.
var signalInfo = map[Signal]struct {
	condition v1.NodeConditionType
	resource  v1.ResourceName
}{
	SignalMemoryAvailable:   {v1.NodeMemoryPressure, v1.ResourceMemory},
	SignalNodeFsAvailable:   {v1.NodeDiskPressure, v1.ResourceEphemeralStorage},
	SignalNodeFsInodesFree:  {v1.NodeDiskPressure, resourceInodes},
	SignalImageFsAvailable:  {v1.NodeDiskPressure, v1.ResourceEphemeralStorage},
	SignalImageFsInodesFree: {v1.NodeDiskPressure, resourceInodes},
	SignalPIDAvailable:      {v1.NodePIDPressure, resourcePIDs},
}

// Value is a threshold's amount: a quantity, or a fraction (0 to 1) of
// the capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float32
}

// Of is the value as a quantity of capacity.
func (v Value) Of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * float64(v.Percentage))
}

// String is the value as configured: a quantity or a percentage.
func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return fmt.Sprintf("%v%%", v.Percentage*100)
}

// Threshold is one eviction threshold: the signal is met while its
// available amount is below Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is how long a soft threshold must hold before pods are
	// evicted; 0 is a hard threshold.
	GracePeriod time.Duration
	// MinReclaim, when set, is how far above Value the signal must come
	// back before the threshold stops being met.
	MinReclaim *Value
}

// Hard reports whether the threshold acts at once.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

// ThresholdConfig is the thresholds in the kubelet's syntax: the
// evictionHard, evictionSoft, evictionSoftGracePeriod and
// evictionMinimumReclaim maps.
type ThresholdConfig struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim map[string]string
}

// ParseThresholds parses the thresholds as the kubelet's
// ParseThresholdConfig does: hard thresholds, then soft ones, each soft
// one with its grace period, the minimum reclaims attached by signal. An
// error names the setting and the entry.
func ParseThresholds(c ThresholdConfig) ([]Threshold, error) {
	var out []Threshold
	for _, set := range []struct {
		name string
		m    map[string]string
	}{{"evictionHard", c.Hard}, {"evictionSoft", c.Soft}} {
		for _, s := range slices.Sorted(maps.Keys(set.m)) {
			t, err := allocatable.ParseThreshold(Signal(s), set.m[s])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", set.name, err)
			}
			if t == nil {
				continue
			}
			th := Threshold{Signal: t.Signal, Value: Value{Quantity: t.Quantity, Percentage: t.Percentage}}
			if set.name == "evictionSoft" {
				g, ok := c.SoftGracePeriod[s]
				if !ok {
					return nil, fmt.Errorf("evictionSoftGracePeriod: grace period must be specified for the soft eviction threshold %s", s)
				}
				d, err := time.ParseDuration(g)
				if err != nil || d <= 0 {
					return nil, fmt.Errorf("evictionSoftGracePeriod: %s=%q: must be a positive duration", s, g)
				}
				th.GracePeriod = d
			}
			out = append(out, th)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(c.SoftGracePeriod)) {
		// A quantity of 1 is valid for every signal: only the name is checked.
		if _, err := allocatable.ParseThreshold(Signal(s), "1"); err != nil {
			return nil, fmt.Errorf("evictionSoftGracePeriod: %w", err)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(c.MinimumReclaim)) {
		v := c.MinimumReclaim[s]
		var mr Value
		if p, ok := strings.CutSuffix(v, "%"); ok {
			t, err := allocatable.ParseThreshold(Signal(s), v)
			if err != nil || t == nil {
				return nil, fmt.Errorf("evictionMinimumReclaim: %s=%q: must be a percentage above 0%% and below 100%%", s, p+"%")
			}
			mr.Percentage = t.Percentage
		} else {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("evictionMinimumReclaim: %s=%q: %w", s, v, err)
			}
			if q.Sign() < 0 {
				return nil, fmt.Errorf("evictionMinimumReclaim: %s=%q: must not be negative", s, v)
			}
			if _, err := allocatable.ParseThreshold(Signal(s), "1"); err != nil {
				return nil, fmt.Errorf("evictionMinimumReclaim: %w", err)
			}
			mr.Quantity = &q
		}
		for i := range out {
			if out[i].Signal == Signal(s) {
				out[i].MinReclaim = &mr
			}
		}
	}
	return out, nil
}

// met is the thresholds met by obs. With minReclaim a threshold's
// minimum reclaim is added to its value: a threshold met before stays
// met until the signal is back above both.
func met(thresholds []Threshold, obs map[Signal]Observation, minReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.Of(o.Capacity)
		if minReclaim && t.MinReclaim != nil {
			q += t.MinReclaim.Of(o.Capacity)
		}
		if o.Available < q {
			out = append(out, t)
		}
	}
	return out
}

// key identifies a threshold among the configured ones.
type key struct {
	signal Signal
	soft   bool
}

func keyOf(t Threshold) key { return key{t.Signal, !t.Hard()} }

// merge is a and those of b not in a.
func merge(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.ContainsFunc(out, func(o Threshold) bool { return keyOf(o) == keyOf(t) }) {
			out = append(out, t)
		}
	}
	return out
}

// conditionsOf is the node conditions the thresholds set, in the order
// first met.
func conditionsOf(thresholds []Threshold) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, t := range thresholds {
		if c := signalInfo[t.Signal].condition; c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// byEvictionPriority orders thresholds as the kubelet acts on them:
// memory first.
func byEvictionPriority(a, b Threshold) int {
	am, bm := a.Signal == SignalMemoryAvailable, b.Signal == SignalMemoryAvailable
	switch {
	case am && !bm:
		return -1
	case bm && !am:
		return 1
	}
	return 0
}
