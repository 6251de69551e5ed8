// Package allocatable is the node's allocatable resources as the kubelet's
// node allocatable computes them (pkg/kubelet/cm: the container manager's
// GetNodeAllocatableReservation, and the node status' MachineInfo setter):
// capacity minus kube-reserved, minus system-reserved, minus the hard
// eviction thresholds of memory.available (from memory) and
// nodefs.available (from ephemeral storage), a percentage taken of the
// capacity; never below zero. It parses the three settings in the
// kubelet's syntax, refusing what the kubelet refuses, and keeps the
// parsed hard thresholds for whoever acts on them.
package allocatable

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourcePID is the reservable process IDs, "pid": reserved from the
// node's PIDs, not part of its capacity in the node status.
const ResourcePID v1.ResourceName = "pid"

// Signal is an eviction signal, by the kubelet's name.
type Signal string

// The eviction signals the kubelet knows.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalPIDAvailable               Signal = "pid.available"
)

var signals = []Signal{
	SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable,
	SignalImageFsInodesFree, SignalContainerFsAvailable, SignalContainerFsInodesFree,
	SignalAllocatableMemoryAvailable, SignalPIDAvailable,
}

// Threshold is a hard eviction threshold: the signal is below Quantity,
// or, with no Quantity, below Percentage (0 to 1) of the capacity.
type Threshold struct {
	Signal     Signal
	Quantity   *resource.Quantity
	Percentage float32
}

// Of is the threshold as a quantity of capacity.
func (t Threshold) Of(capacity resource.Quantity) resource.Quantity {
	if t.Quantity != nil {
		return t.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(capacity.Value())*float64(t.Percentage)), resource.BinarySI)
}

// Config is the node's reservations, in the kubelet's syntax.
type Config struct {
	// KubeReserved and SystemReserved map a resource (cpu, memory,
	// ephemeral-storage, pid) to a quantity.
	KubeReserved, SystemReserved map[string]string
	// EvictionHard maps a signal to a quantity or a percentage
	// ("memory.available": "100Mi", "nodefs.available": "10%"); 0% and
	// 100% are no threshold, as the kubelet's.
	EvictionHard map[string]string
}

// Reservation is what the node keeps from pods. Build it with New.
type Reservation struct {
	kube, system v1.ResourceList
	hard         []Threshold
}

// New parses cfg; an error names the setting and the entry.
func New(cfg Config) (*Reservation, error) {
	r := &Reservation{}
	var err error
	if r.kube, err = parseReserved("kubeReserved", cfg.KubeReserved); err != nil {
		return nil, err
	}
	if r.system, err = parseReserved("systemReserved", cfg.SystemReserved); err != nil {
		return nil, err
	}
	for _, s := range slices.Sorted(maps.Keys(cfg.EvictionHard)) {
		t, err := ParseThreshold(Signal(s), cfg.EvictionHard[s])
		if err != nil {
			return nil, fmt.Errorf("evictionHard: %w", err)
		}
		if t != nil {
			r.hard = append(r.hard, *t)
		}
	}
	return r, nil
}

func parseReserved(setting string, m map[string]string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch n := v1.ResourceName(k); n {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, ResourcePID:
			q, err := resource.ParseQuantity(m[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %s=%q: %w", setting, k, m[k], err)
			}
			if q.Sign() < 0 {
				return nil, fmt.Errorf("%s: %s=%q: a reservation cannot be negative", setting, k, m[k])
			}
			out[n] = q
		default:
			return nil, fmt.Errorf("%s: cannot reserve %q (cpu, memory, ephemeral-storage and pid can be)", setting, k)
		}
	}
	return out, nil
}

// ParseThreshold parses one statement as the kubelet does; nil for 0%
// and 100%, which set no threshold.
func ParseThreshold(s Signal, v string) (*Threshold, error) {
	if !slices.Contains(signals, s) {
		return nil, fmt.Errorf("unsupported eviction signal %q", s)
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		if v == "0%" || v == "100%" {
			return nil, nil
		}
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			return nil, fmt.Errorf("%s<%s: %w", s, v, err)
		}
		if f < 0 || f > 100 {
			return nil, fmt.Errorf("%s<%s: a percentage must be between 0%% and 100%%", s, v)
		}
		return &Threshold{Signal: s, Percentage: float32(f / 100)}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return nil, fmt.Errorf("%s<%s: %w", s, v, err)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("%s<%s: the threshold must be positive", s, v)
	}
	return &Threshold{Signal: s, Quantity: &q}, nil
}

// HardThresholds are the hard eviction thresholds, by signal name.
func (r *Reservation) HardThresholds() []Threshold { return slices.Clone(r.hard) }

// Reserved is, per resource of capacity, what is kept from pods:
// system-reserved plus kube-reserved plus the hard eviction threshold of
// memory.available (memory) and nodefs.available (ephemeral-storage).
// Resources with nothing reserved are left out.
func (r *Reservation) Reserved(capacity v1.ResourceList) v1.ResourceList {
	eviction := v1.ResourceList{}
	for _, t := range r.hard {
		switch t.Signal {
		case SignalMemoryAvailable:
			eviction[v1.ResourceMemory] = t.Of(capacity[v1.ResourceMemory])
		case SignalNodeFsAvailable:
			eviction[v1.ResourceEphemeralStorage] = t.Of(capacity[v1.ResourceEphemeralStorage])
		}
	}
	out := v1.ResourceList{}
	for n := range capacity {
		sum := resource.NewQuantity(0, resource.DecimalSI)
		for _, l := range []v1.ResourceList{r.system, r.kube, eviction} {
			if q, ok := l[n]; ok {
				sum.Add(q)
			}
		}
		if !sum.IsZero() {
			out[n] = *sum
		}
	}
	return out
}

// Allocatable is capacity minus Reserved, never below zero. It fails,
// naming the resource, when a reservation is larger than the capacity,
// as the kubelet refuses to start then.
func (r *Reservation) Allocatable(capacity v1.ResourceList) (v1.ResourceList, error) {
	reserved := r.Reserved(capacity)
	var errs []string
	for _, n := range slices.Sorted(maps.Keys(reserved)) {
		left := capacity[n].DeepCopy()
		left.Sub(reserved[n])
		if left.Sign() < 0 {
			q, res := capacity[n], reserved[n]
			errs = append(errs, fmt.Sprintf("resource %q has a reservation of %s but a capacity of %s", n, res.String(), q.String()))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid node allocatable configuration: %s (capacity must be at least the reservation)", strings.Join(errs, "; "))
	}
	out := v1.ResourceList{}
	for n, q := range capacity {
		a := q.DeepCopy()
		if res, ok := reserved[n]; ok {
			a.Sub(res)
		}
		out[n] = a
	}
	return out, nil
}
