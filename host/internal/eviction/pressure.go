package eviction

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's node-pressure messages and reasons
// (pkg/kubelet/eviction/helpers.go), trailing spaces included.
const (
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "

	// ReasonThresholdMet is the Node event of a pass that acts on a
	// threshold.
	ReasonThresholdMet = "EvictionThresholdMet"
)

// hardGracePeriod is the seconds a pod evicted for a hard threshold gets
// to stop, the kubelet's.
const hardGracePeriod = 1

// pressure is the node-pressure state kept between passes.
type pressure struct {
	met           []Threshold       // thresholds met last pass, grace periods passed
	firstObserved map[key]time.Time // when each threshold met was first seen
	lastObserved  map[v1.NodeConditionType]time.Time
	conditions    []v1.NodeConditionType // the node's pressure conditions now
}

// observe reads the signals and updates the state as the kubelet's
// synchronize does: thresholds met now, or met before and not yet back
// above their minimum reclaim; conditions kept True for the transition
// period after they were last seen; the thresholds whose grace period
// has passed returned to act on.
func (m *Manager) observe(ctx context.Context) ([]Threshold, Observations, bool) {
	if len(m.cfg.Thresholds) == 0 {
		return nil, Observations{}, false
	}
	obs, err := m.cfg.Signals.Observe(ctx)
	if err != nil {
		m.log.Warn("eviction: signals not read; retried next period", "error", err)
		return nil, obs, false
	}
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := met(m.cfg.Thresholds, obs.Signals, false)
	if len(m.p.met) > 0 {
		ts = merge(ts, met(m.p.met, obs.Signals, true))
	}
	first := map[key]time.Time{}
	for _, t := range ts {
		at, ok := m.p.firstObserved[keyOf(t)]
		if !ok {
			at = now
		}
		first[keyOf(t)] = at
	}
	for _, c := range conditionsOf(ts) {
		m.p.lastObserved[c] = now
	}
	var conds []v1.NodeConditionType
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if at, ok := m.p.lastObserved[c]; ok && now.Sub(at) < m.cfg.PressureTransitionPeriod {
			conds = append(conds, c)
		} else {
			delete(m.p.lastObserved, c)
		}
	}
	if !slices.Equal(conds, m.p.conditions) {
		m.log.Info("eviction: node pressure conditions changed", "from", m.p.conditions, "to", conds)
		m.recordTransitions(m.p.conditions, conds)
	}
	var act []Threshold
	for _, t := range ts {
		if now.Sub(first[keyOf(t)]) >= t.GracePeriod {
			act = append(act, t)
		}
	}
	m.p.met, m.p.firstObserved, m.p.conditions = act, first, conds
	return act, obs, true
}

// transitionReasons are the kubelet's Node events of a pressure condition
// turning True and turning False.
var transitionReasons = map[v1.NodeConditionType][2]string{
	v1.NodeMemoryPressure: {"NodeHasInsufficientMemory", "NodeHasSufficientMemory"},
	v1.NodeDiskPressure:   {"NodeHasDiskPressure", "NodeHasNoDiskPressure"},
	v1.NodePIDPressure:    {"NodeHasInsufficientPID", "NodeHasSufficientPID"},
}

// recordTransitions records a Normal event on the Node for each pressure
// condition that turned, with the kubelet's reason and message.
func (m *Manager) recordTransitions(from, to []v1.NodeConditionType) {
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		was, is := slices.Contains(from, c), slices.Contains(to, c)
		if was == is {
			continue
		}
		reason := transitionReasons[c][1]
		if is {
			reason = transitionReasons[c][0]
		}
		m.cfg.NodeEvent(v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", m.cfg.NodeName, reason))
	}
}

// Conditions are the node's pressure conditions that are True now, in
// the order MemoryPressure, DiskPressure, PIDPressure.
func (m *Manager) Conditions() []v1.NodeConditionType {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.p.conditions)
}

// relieve acts on the thresholds met: the first by the kubelet's order
// (memory first) names the resource; node-level resources are reclaimed
// first for disk; then the active pods are ranked and the first that may
// be evicted is. It returns the pod evicted, if any.
func (m *Manager) relieve(ctx context.Context, act []Threshold, obs Observations, stats map[types.UID]*statsapi.PodStats) *v1.Pod {
	slices.SortStableFunc(act, byEvictionPriority)
	t := act[0]
	res := signalInfo[t.Signal].resource
	m.log.Info("eviction: attempting to reclaim", "resource", res, "signal", t.Signal)
	m.cfg.NodeEvent(v1.EventTypeWarning, ReasonThresholdMet, fmt.Sprintf("Attempting to reclaim %s", res))
	if m.reclaimNodeLevel(ctx, t.Signal, obs.DedicatedImageFs) {
		m.log.Info("eviction: pressure relieved without evicting pods", "resource", res)
		return nil
	}
	var pods []*v1.Pod
	for _, p := range m.cfg.Pods.Pods() {
		if m.active(p) {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		m.log.Error("eviction: thresholds met, but no pods are active to evict", "signal", t.Signal)
		return nil
	}
	lookup := func(p *v1.Pod) (*statsapi.PodStats, bool) { ps, ok := stats[p.UID]; return ps, ok }
	switch {
	case t.Signal == SignalMemoryAvailable:
		rankMemory(pods, lookup)
	case t.Signal == SignalPIDAvailable:
		rankPIDs(pods, lookup)
	default:
		rankDisk(t.Signal, obs.DedicatedImageFs)(pods, lookup)
	}
	for _, p := range pods {
		grace := int64(hardGracePeriod)
		if !t.Hard() {
			grace = m.cfg.MaxPodGracePeriod
			if p.Spec.TerminationGracePeriodSeconds != nil {
				grace = min(grace, *p.Spec.TerminationGracePeriodSeconds)
			}
		}
		e := Eviction{Signal: t.Signal, Message: message(res, p, stats[p.UID], act, obs.Signals)}
		if m.evict(p, e, grace) {
			return p
		}
	}
	m.log.Error("eviction: unable to evict any pod from the node", "signal", t.Signal)
	return nil
}

// reclaimNodeLevel frees what the node itself holds on a pressured disk,
// as the kubelet: dead containers, then unused images, when the images
// live on the pressured filesystem (imagefs signals, or nodefs ones
// without a dedicated image filesystem). It reports whether the
// thresholds are no longer met afterwards.
func (m *Manager) reclaimNodeLevel(ctx context.Context, s Signal, dedicatedImageFs bool) bool {
	switch s {
	case SignalImageFsAvailable, SignalImageFsInodesFree:
	case SignalNodeFsAvailable, SignalNodeFsInodesFree:
		if dedicatedImageFs {
			return false
		}
	default:
		return false
	}
	if m.cfg.Reclaim.Containers != nil {
		if err := m.cfg.Reclaim.Containers(ctx); err != nil {
			m.log.Warn("eviction: removing dead containers failed", "error", err)
		}
	}
	if m.cfg.Reclaim.Images != nil {
		freed, err := m.cfg.Reclaim.Images(ctx)
		if err != nil {
			m.log.Warn("eviction: removing unused images failed", "error", err)
		}
		m.log.Info("eviction: unused images removed", "bytes_freed", freed)
	}
	obs, err := m.cfg.Signals.Observe(ctx)
	if err != nil {
		return false
	}
	m.mu.Lock()
	still := met(m.p.met, obs.Signals, true)
	m.mu.Unlock()
	return len(still) == 0
}

// message is the kubelet's eviction message: the resource, the threshold
// and what was available, and each container using more than it
// requested.
func message(res v1.ResourceName, pod *v1.Pod, ps *statsapi.PodStats, act []Threshold, obs map[Signal]Observation) string {
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	for _, t := range act {
		o, ok := obs[t.Signal]
		if signalInfo[t.Signal].resource != res || !ok {
			continue
		}
		format := resource.BinarySI
		if res == resourceInodes || res == resourcePIDs {
			format = resource.DecimalSI
		}
		q := resource.NewQuantity(t.Value.Of(o.Capacity), format)
		if t.Value.Quantity != nil {
			q = t.Value.Quantity
		}
		msg += fmt.Sprintf(thresholdMetMessageFmt, q, resource.NewQuantity(o.Available, format))
		break
	}
	if ps == nil {
		return msg
	}
	containers := append(slices.Clone(pod.Spec.Containers), pod.Spec.InitContainers...)
	for _, cs := range ps.Containers {
		i := slices.IndexFunc(containers, func(c v1.Container) bool { return c.Name == cs.Name })
		if i < 0 {
			continue
		}
		req := containers[i].Resources.Requests[res]
		var usage *resource.Quantity
		switch res {
		case v1.ResourceMemory:
			if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
				usage = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
			}
		case v1.ResourceEphemeralStorage:
			if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
				usage = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
			}
		}
		if usage != nil && usage.Cmp(req) > 0 {
			msg += fmt.Sprintf(containerMessageFmt, cs.Name, usage.String(), req.String(), res)
		}
	}
	return msg
}

// waitKilled waits, polling, until the pod's worker has finished killing
// it or CleanupTimeout passes, as the kubelet waits for an evicted pod
// before its next pass.
func (m *Manager) waitKilled(ctx context.Context, pod *v1.Pod) {
	deadline := time.NewTimer(m.cfg.CleanupTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(m.cfg.CleanupPoll)
	defer tick.Stop()
	for m.cfg.Workers.IsTerminating(pod.UID) {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			m.log.Warn("eviction: timed out waiting for the evicted pod to be killed", "pod", pod.Namespace+"/"+pod.Name, "timeout", m.cfg.CleanupTimeout)
			return
		case <-tick.C:
		}
	}
	m.log.Info("eviction: evicted pod killed", "pod", pod.Namespace+"/"+pod.Name)
}
