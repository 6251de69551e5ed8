// Package allocation keeps the resources the node allocated to each pod's
// containers and the resources applied to them, as the kubelet's allocation
// manager does for in-place pod resize: a pod is admitted at its
// allocation, a resize (a change of its containers' resources) is decided
// against the node's allocatable — it becomes the allocation, or waits
// (Deferred) or never can be (Infeasible) — and the runtime applies the
// allocation to the running containers, recording what it applied (the
// actuated resources). Both are kept in a checkpoint under the root dir, so
// an agent restart neither re-decides nor re-applies what was done.
//
// The PodResizePending and PodResizeInProgress conditions and the resize
// events are the kubelet's.
package allocation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
	"github.com/wasmlet/wasmlet/host/internal/regularfile"
)

// CheckpointName is the checkpoint's file name under the root dir
// (wasmlet's own format, not the kubelet's allocated_pods_state).
const CheckpointName = "wasmlet_allocation_checkpoint"

// The kubelet's resize event reasons.
const (
	EventResizeStarted    = "ResizeStarted"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeError      = "ResizeError"
)

// ReasonError is the PodResizeInProgress reason of a resize the runtime
// failed to apply.
const ReasonError = "Error"

// Admitter is the admission chain a Manager wraps (*admission.Chain).
type Admitter interface {
	// Admit asks every admitter in turn; the first rejection wins.
	Admit(ctx context.Context, attrs admission.Attributes) admission.Result
}

// Recorder records Kubernetes Events about pods.
type Recorder interface {
	// Event records an event of eventType about pod.
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Config configures a Manager.
type Config struct {
	// RootDir holds the checkpoint file.
	RootDir string
	// Admit is the admission chain new pods go through, at their
	// allocation; required.
	Admit Admitter
	// Fit decides whether a resize fits beside the other pods; nil means
	// admission.ResourceFit().
	Fit admission.Admitter
	// Node returns this node (its allocatable); required.
	Node func() *v1.Node
	// ActivePods returns the pods holding the node's resources; required.
	ActivePods func() []*v1.Pod
	// Events records the resize events; nil records none.
	Events Recorder
	// Resync asks for a sync of a pod whose deferred resize may fit now
	// (another pod went, or shrank); nil leaves it to the pod's next
	// periodic sync.
	Resync func(uid types.UID)
	// InPlaceUnsupported, when set and returning a reason, says why the
	// runtime cannot change a running container's resources: a resize is
	// then Infeasible unless every resource it changes has resizePolicy
	// RestartContainer (the container is restarted with its new
	// resources). It is asked at each decision: the runtime is known only
	// once connected.
	InPlaceUnsupported func() string
	// Logger receives structured logs; nil means none.
	Logger hclog.Logger
}

// Manager keeps the allocations and decides resizes. It is safe for
// concurrent use.
type Manager struct {
	cfg  Config
	log  hclog.Logger
	path string

	// decide serialises admission and resize decisions: each reads every
	// other pod's allocation.
	decide sync.Mutex

	mu      sync.Mutex
	pods    map[types.UID]*podRecord
	conds   map[types.UID]*resizeConditions
	pending map[types.UID]bool // deferred resizes, retried when room appears
}

// podRecord is one pod's entry of the checkpoint.
type podRecord struct {
	Pod        string                      `json:"pod"`
	Containers map[string]*containerRecord `json:"containers"`
}

// containerRecord is what one container was allocated and, once the
// runtime applied it, the resources it runs with.
type containerRecord struct {
	Allocated v1.ResourceRequirements  `json:"allocated"`
	Actuated  *v1.ResourceRequirements `json:"actuated,omitempty"`
}

// checkpoint is the file's content.
type checkpoint struct {
	Pods map[types.UID]*podRecord `json:"pods"`
}

type resizeConditions struct {
	pending, inProgress *v1.PodCondition
}

// New reads the checkpoint (a missing one is empty, a broken one is logged
// and ignored) and returns the Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" || cfg.Admit == nil || cfg.Node == nil || cfg.ActivePods == nil {
		return nil, errors.New("allocation: RootDir, Admit, Node and ActivePods are required")
	}
	if cfg.Fit == nil {
		cfg.Fit = admission.ResourceFit()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, path: filepath.Join(cfg.RootDir, CheckpointName),
		pods: map[types.UID]*podRecord{}, conds: map[types.UID]*resizeConditions{}, pending: map[types.UID]bool{}}
	data, err := os.ReadFile(m.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("allocation: checkpoint %s: %w", m.path, err)
	default:
		var cp checkpoint
		if err := json.Unmarshal(data, &cp); err != nil {
			m.log.Error("allocation checkpoint unreadable; pods are admitted at their spec's resources", "file", m.path, "error", err)
		} else if cp.Pods != nil {
			m.pods = cp.Pods
		}
	}
	return m, nil
}

// write saves the checkpoint whole, atomically; called with mu held.
func (m *Manager) write() error {
	data, err := json.Marshal(checkpoint{Pods: m.pods})
	if err == nil {
		err = os.MkdirAll(filepath.Dir(m.path), 0o750)
	}
	if err == nil {
		err = regularfile.WriteAtomic(m.path, data)
	}
	if err != nil {
		m.log.Error("allocation checkpoint not written", "file", m.path, "error", err)
		return fmt.Errorf("allocation: checkpoint %s: %w", m.path, err)
	}
	return nil
}

// resizable are the containers whose resources are allocated: the app
// containers and the sidecars (restartable init containers), as the
// kubelet resizes them.
func resizable(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; container.IsSidecar(c) {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// PodAtAllocation is pod with each container's resources replaced by its
// allocation (pod itself, not a copy, when they are equal), and whether
// any differed.
func (m *Manager) PodAtAllocation(pod *v1.Pod) (*v1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.podAtAllocation(pod)
}

func (m *Manager) podAtAllocation(pod *v1.Pod) (*v1.Pod, bool) {
	rec := m.pods[pod.UID]
	if rec == nil {
		return pod, false
	}
	out := pod
	for i, c := range resizable(pod) {
		cr := rec.Containers[c.Name]
		if cr == nil || apiequality.Semantic.DeepEqual(c.Resources, cr.Allocated) {
			continue
		}
		if out == pod {
			out = pod.DeepCopy()
		}
		*resizable(out)[i] = withResources(*c, cr.Allocated)
	}
	return out, out != pod
}

func withResources(c v1.Container, r v1.ResourceRequirements) v1.Container {
	c.Resources = *r.DeepCopy()
	return c
}

// setAllocated records pod's containers' resources as their allocation,
// keeping what was actuated; called with mu held.
func (m *Manager) setAllocated(pod *v1.Pod) error {
	rec := m.pods[pod.UID]
	if rec == nil {
		rec = &podRecord{Containers: map[string]*containerRecord{}}
		m.pods[pod.UID] = rec
	}
	rec.Pod = podspec.Name(pod)
	for _, c := range resizable(pod) {
		cr := rec.Containers[c.Name]
		if cr == nil {
			cr = &containerRecord{}
			rec.Containers[c.Name] = cr
		}
		cr.Allocated = *c.Resources.DeepCopy()
	}
	return m.write()
}

// Admit admits a new pod through the chain at its allocation (after a
// restart, the checkpoint's, not a resize the spec asks for meanwhile),
// the other pods at theirs, and records the allocation of an admitted pod.
// The resize conditions a pod's API status carries are taken back, so a
// restart neither forgets a pending resize nor repeats its event.
func (m *Manager) Admit(ctx context.Context, attrs admission.Attributes) admission.Result {
	m.decide.Lock()
	defer m.decide.Unlock()
	m.restoreConditions(attrs.Pod)
	m.mu.Lock()
	pod, _ := m.podAtAllocation(attrs.Pod)
	others := make([]*v1.Pod, len(attrs.Pods))
	for i, p := range attrs.Pods {
		others[i], _ = m.podAtAllocation(p)
	}
	m.mu.Unlock()
	r := m.cfg.Admit.Admit(ctx, admission.Attributes{Pod: pod, Node: attrs.Node, Pods: others})
	if r.Admit {
		m.mu.Lock()
		m.setAllocated(pod) // logged; the pod runs at its spec's resources
		m.mu.Unlock()
	}
	return r
}

// restoreConditions takes the pod's resize conditions from its API status
// when none are held for it (the agent restarted).
func (m *Manager) restoreConditions(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conds[pod.UID] != nil {
		return
	}
	rc := &resizeConditions{}
	for i := range pod.Status.Conditions {
		c := pod.Status.Conditions[i]
		switch c.Type {
		case v1.PodResizePending:
			rc.pending = &c
		case v1.PodResizeInProgress:
			rc.inProgress = &c
		}
	}
	if rc.pending != nil || rc.inProgress != nil {
		m.conds[pod.UID] = rc
		if rc.pending != nil && rc.pending.Reason == v1.PodReasonDeferred {
			m.pending[pod.UID] = true
		}
	}
}

// Resize decides the resize pod's spec asks for, if any, and returns the
// pod to run: at its allocation, which is the spec when the resize fits
// (PodResizeInProgress, a ResizeStarted event) and stays the old one when
// it does not (PodResizePending Deferred, retried at the pod's next sync
// and when another pod goes, or Infeasible). Called at each sync of the
// pod.
func (m *Manager) Resize(ctx context.Context, pod *v1.Pod) *v1.Pod {
	m.decide.Lock()
	defer m.decide.Unlock()
	m.mu.Lock()
	if m.pods[pod.UID] == nil {
		// Never admitted through the manager (nothing to compare with):
		// the spec is the allocation.
		m.setAllocated(pod)
		m.mu.Unlock()
		return pod
	}
	alloc, changed := m.podAtAllocation(pod)
	if !changed {
		m.clearPending(pod.UID)
		m.mu.Unlock()
		return pod
	}
	others := m.othersAtAllocation(pod.UID)
	m.mu.Unlock()

	reason, msg := m.check(ctx, pod, alloc, others)
	m.mu.Lock()
	if reason == "" {
		err := m.setAllocated(pod)
		if err == nil {
			m.clearPending(pod.UID)
			m.setInProgress(pod.UID, "", "", pod.Generation)
		}
		retry := m.pendingOthers(pod.UID)
		m.mu.Unlock()
		if err != nil {
			return alloc
		}
		m.log.Info("pod resize allocated", "pod", podspec.Name(pod), "generation", pod.Generation)
		m.event(pod, v1.EventTypeNormal, EventResizeStarted, resizeMessage("Pod resize started", pod, pod.Generation, ""))
		if requestsDecrease(alloc, pod) {
			m.resync(retry)
		}
		return pod
	}
	changedCond := m.setPending(pod.UID, reason, msg, pod.Generation)
	if reason == v1.PodReasonDeferred {
		m.pending[pod.UID] = true
	} else {
		delete(m.pending, pod.UID)
	}
	m.mu.Unlock()
	if changedCond {
		kind := EventResizeDeferred
		if reason == v1.PodReasonInfeasible {
			kind = EventResizeInfeasible
		}
		m.log.Info("pod resize pending", "pod", podspec.Name(pod), "reason", reason, "message", msg)
		m.event(pod, v1.EventTypeWarning, kind, resizeMessage("Pod resize "+reason, pod, pod.Generation, msg))
	}
	return alloc
}

// othersAtAllocation are the active pods but uid, at their allocations;
// called with mu held.
func (m *Manager) othersAtAllocation(uid types.UID) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range m.cfg.ActivePods() {
		if p.UID == uid {
			continue
		}
		a, _ := m.podAtAllocation(p)
		out = append(out, a)
	}
	return out
}

// check decides a resize: "" when pod (the spec) fits, else the pending
// reason (Infeasible, Deferred) and why. alloc is the pod at its current
// allocation.
func (m *Manager) check(ctx context.Context, pod, alloc *v1.Pod, others []*v1.Pod) (string, string) {
	if m.cfg.InPlaceUnsupported != nil {
		if why := m.cfg.InPlaceUnsupported(); why != "" {
			if msg := needsInPlace(pod, alloc); msg != "" {
				return v1.PodReasonInfeasible, why + ": " + msg
			}
		}
	}
	node := m.cfg.Node()
	if node != nil {
		want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		for _, r := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
			have, ok := node.Status.Allocatable[r]
			if !ok {
				continue
			}
			req := want[r]
			if req.Cmp(have) > 0 {
				// As the kubelet words it: millicores, bytes.
				want, capacity := req.MilliValue(), have.MilliValue()
				if r == v1.ResourceMemory {
					want, capacity = req.Value(), have.Value()
				}
				return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d", r, want, capacity)
			}
		}
	}
	r, err := m.cfg.Fit.Admit(ctx, admission.Attributes{Pod: pod, Node: node, Pods: others})
	switch {
	case err != nil:
		return v1.PodReasonDeferred, err.Error()
	case !r.Admit:
		return v1.PodReasonDeferred, r.Message
	}
	return "", ""
}

// needsInPlace names the first container and resource the resize changes
// whose resizePolicy is not RestartContainer; "" when there is none.
func needsInPlace(pod, alloc *v1.Pod) string {
	before := resizable(alloc)
	for i, c := range resizable(pod) {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if !ResourceChanged(before[i].Resources, c.Resources, r) {
				continue
			}
			if Policy(c, r) != v1.RestartContainer {
				return fmt.Sprintf("container %s: %s cannot change without a restart (its resizePolicy for %s is not %s)", c.Name, r, r, v1.RestartContainer)
			}
		}
	}
	return ""
}

// ResourceChanged reports whether resource r's request or limit differs
// between a and b.
func ResourceChanged(a, b v1.ResourceRequirements, r v1.ResourceName) bool {
	qa, oka := a.Requests[r]
	qb, okb := b.Requests[r]
	if oka != okb || qa.Cmp(qb) != 0 {
		return true
	}
	qa, oka = a.Limits[r]
	qb, okb = b.Limits[r]
	return oka != okb || qa.Cmp(qb) != 0
}

// Policy is the container's resize restart policy for r (NotRequired
// when it names none).
func Policy(c *v1.Container, r v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == r {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

// requestsDecrease reports whether the new pod requests less cpu or
// memory than the old: room may have appeared for a deferred resize.
func requestsDecrease(old, new *v1.Pod) bool {
	o := resourcehelper.PodRequests(old, resourcehelper.PodResourcesOptions{})
	n := resourcehelper.PodRequests(new, resourcehelper.PodResourcesOptions{})
	return n.Cpu().Cmp(*o.Cpu()) < 0 || n.Memory().Cmp(*o.Memory()) < 0
}

// pendingOthers are the pods with deferred resizes but uid; called with mu
// held.
func (m *Manager) pendingOthers(uid types.UID) []types.UID {
	var out []types.UID
	for p := range m.pending {
		if p != uid {
			out = append(out, p)
		}
	}
	return out
}

func (m *Manager) resync(uids []types.UID) {
	if m.cfg.Resync == nil {
		return
	}
	for _, uid := range uids {
		m.cfg.Resync(uid)
	}
}

func (m *Manager) event(pod *v1.Pod, eventType, reason, msg string) {
	if m.cfg.Events != nil {
		m.cfg.Events.Event(pod, eventType, reason, msg)
	}
}

// setPending sets the PodResizePending condition; it reports whether its
// reason or message changed (an event is due). Called with mu held.
func (m *Manager) setPending(uid types.UID, reason, msg string, generation int64) bool {
	rc := m.condsOf(uid)
	if p := rc.pending; p != nil && p.Reason == reason && p.Message == msg {
		p.ObservedGeneration = generation
		return false
	}
	rc.pending = &v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(time.Now())}
	return true
}

// setInProgress sets the PodResizeInProgress condition, keeping its
// transition time; it reports whether its reason or message changed.
// Called with mu held.
func (m *Manager) setInProgress(uid types.UID, reason, msg string, generation int64) bool {
	rc := m.condsOf(uid)
	if p := rc.inProgress; p != nil {
		changed := p.Reason != reason || p.Message != msg
		p.Reason, p.Message, p.ObservedGeneration = reason, msg, generation
		return changed
	}
	rc.inProgress = &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(time.Now())}
	return true
}

func (m *Manager) condsOf(uid types.UID) *resizeConditions {
	rc := m.conds[uid]
	if rc == nil {
		rc = &resizeConditions{}
		m.conds[uid] = rc
	}
	return rc
}

// clearPending drops the PodResizePending condition; called with mu held.
func (m *Manager) clearPending(uid types.UID) {
	delete(m.pending, uid)
	if rc := m.conds[uid]; rc != nil {
		rc.pending = nil
	}
}

// Conditions are the pod's resize conditions, PodResizePending then
// PodResizeInProgress, as its status shows them.
func (m *Manager) Conditions(uid types.UID) []v1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	rc := m.conds[uid]
	if rc == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, c := range []*v1.PodCondition{rc.pending, rc.inProgress} {
		if c != nil {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}

// Allocated is the container's allocation.
func (m *Manager) Allocated(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cr := m.pods[uid].container(name); cr != nil {
		return *cr.Allocated.DeepCopy(), true
	}
	return v1.ResourceRequirements{}, false
}

// Actuated are the resources the runtime last applied to the container.
func (m *Manager) Actuated(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cr := m.pods[uid].container(name); cr != nil && cr.Actuated != nil {
		return *cr.Actuated.DeepCopy(), true
	}
	return v1.ResourceRequirements{}, false
}

// SetActuated records the resources the runtime applied to the container
// (at its start, or by UpdateContainerResources).
func (m *Manager) SetActuated(uid types.UID, name string, r v1.ResourceRequirements) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.pods[uid]
	if rec == nil {
		rec = &podRecord{Containers: map[string]*containerRecord{}}
		m.pods[uid] = rec
	}
	cr := rec.Containers[name]
	if cr == nil {
		cr = &containerRecord{Allocated: *r.DeepCopy()}
		rec.Containers[name] = cr
	}
	if cr.Actuated != nil && apiequality.Semantic.DeepEqual(*cr.Actuated, r) {
		return nil
	}
	cr.Actuated = r.DeepCopy()
	return m.write()
}

func (r *podRecord) container(name string) *containerRecord {
	if r == nil {
		return nil
	}
	return r.Containers[name]
}

// Done is told the outcome of a sync of pod (its spec) that read rs back
// from the runtime: a failed resize (err) makes PodResizeInProgress say
// Error with the message (a ResizeError event); once every running
// container runs at its allocation the condition goes (a ResizeCompleted
// event).
func (m *Manager) Done(pod *v1.Pod, rs *container.PodStatus, err error) {
	m.mu.Lock()
	rc := m.conds[pod.UID]
	if rc == nil || rc.inProgress == nil {
		m.mu.Unlock()
		return
	}
	gen := rc.inProgress.ObservedGeneration
	if err != nil {
		changed := m.setInProgress(pod.UID, ReasonError, err.Error(), gen)
		alloc, _ := m.podAtAllocation(pod)
		m.mu.Unlock()
		if changed {
			m.log.Warn("pod resize failed", "pod", podspec.Name(pod), "error", err)
			m.event(pod, v1.EventTypeWarning, EventResizeError, resizeMessage("Pod resize error", alloc, gen, err.Error()))
		}
		return
	}
	rec := m.pods[pod.UID]
	for _, c := range resizable(pod) {
		s := rs.FindContainer(c.Name)
		if s == nil || s.State != container.StateRunning {
			continue
		}
		cr := rec.container(c.Name)
		if cr == nil || cr.Actuated == nil {
			continue
		}
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if ResourceChanged(cr.Allocated, *cr.Actuated, r) {
				m.mu.Unlock()
				return
			}
		}
	}
	rc.inProgress = nil
	alloc, _ := m.podAtAllocation(pod)
	m.mu.Unlock()
	m.log.Info("pod resize completed", "pod", podspec.Name(pod), "generation", gen)
	m.event(pod, v1.EventTypeNormal, EventResizeCompleted, resizeMessage("Pod resize completed", alloc, gen, ""))
}

// RemovePod forgets a pod gone from the node and asks for a sync of the
// pods whose resize was deferred: its resources are free.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	_, had := m.pods[uid]
	delete(m.pods, uid)
	delete(m.conds, uid)
	delete(m.pending, uid)
	if had {
		m.write()
	}
	retry := m.pendingOthers(uid)
	m.mu.Unlock()
	m.resync(retry)
}

// resizeMessage is an event message in the kubelet's form: a prefix, then
// the containers' resources and the generation (and an error) as JSON.
func resizeMessage(prefix string, pod *v1.Pod, generation int64, errMsg string) string {
	type named struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		InitContainers []named `json:"initContainers,omitempty"`
		Containers     []named `json:"containers,omitempty"`
		Generation     int64   `json:"generation"`
		Error          string  `json:"error,omitempty"`
	}{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		if container.IsSidecar(&c) {
			summary.InitContainers = append(summary.InitContainers, named{c.Name, c.Resources})
		}
	}
	for _, c := range pod.Spec.Containers {
		summary.Containers = append(summary.Containers, named{c.Name, c.Resources})
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(b)
}
