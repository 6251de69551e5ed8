package node

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// LeaseNamespace holds the nodes' heartbeat Leases.
const LeaseNamespace = v1.NamespaceNodeLease

// RegistrarConfig configures NewRegistrar. Zero durations get the kubelet's
// defaults.
type RegistrarConfig struct {
	// Client talks to the API server with the node's credentials.
	Client kubernetes.Interface
	// HeartbeatClient, when set, renews the Lease and posts the node
	// status instead of Client: as the kubelet's heartbeat client, one
	// whose requests no burst of pod status writes queues behind (no
	// client-side rate limit) and that gives up on a request after a
	// heartbeat period, so the next renewal is tried on time.
	HeartbeatClient kubernetes.Interface
	// Node is the local node as New built it (name, labels, capacity,
	// addresses, node info); its status is what gets reported.
	Node *v1.Node
	// Ready reports why the node is not ready (runtime or PLEG unhealthy);
	// nil error means Ready. Nil means always ready.
	Ready func() error
	// Pressure gives the node's pressure conditions that are True now
	// (MemoryPressure, DiskPressure, PIDPressure: the eviction manager's);
	// nil means none.
	Pressure func() []v1.NodeConditionType
	// RuntimeHandlers are the runtime's handlers as its CRI Status last
	// listed them (status.runtimeHandlers, as the kubelet reports them);
	// nil leaves them out.
	RuntimeHandlers func() []v1.NodeRuntimeHandler
	// ExtendedResources, when set, gives the resources beyond the
	// machine's (device plugins'), added to every status's capacity and
	// allocatable (see AddExtendedResources).
	ExtendedResources func() (capacity, allocatable v1.ResourceList)
	// StatusUpdateFrequency is how often the node status is computed and,
	// when it changed, posted (the kubelet's nodeStatusUpdateFrequency, 10 s).
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is how often an unchanged status is posted anyway
	// (nodeStatusReportFrequency, 5 min); the Lease is the heartbeat.
	StatusReportFrequency time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds (40 s); it is renewed
	// a quarter of it (10 s, plus up to 4 % jitter) after each renewal, as
	// the kubelet does.
	LeaseDuration time.Duration
	// NoCreate leaves the Node's creation to someone else (the kubelet's
	// registerNode: false): the registrar waits for the Node to exist,
	// then reports its status and renews its Lease.
	NoCreate bool
	// Logger receives the registrar's logs; nil discards.
	Logger hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Registrar registers the node with the API server (creating or adopting
// the Node object), posts its status on the kubelet's cadence and renews
// its Lease in kube-node-lease. Build it with NewRegistrar; Run drives it.
type Registrar struct {
	cfg RegistrarConfig
	log hclog.Logger

	mu         sync.Mutex
	registered *v1.Node // as the API server returned it (UID)
	sent       *v1.NodeStatus
	sentAt     time.Time
	lease      *coordinationv1.Lease

	// after is how the Lease loop waits between renewals; tests replace it.
	after func(time.Duration) <-chan time.Time
}

// leaseJitter is the most, as a fraction of the interval, that a wait
// between Lease renewals is lengthened by at random: the kubelet's lease
// controller's 0.04.
const leaseJitter = 0.04

// NewRegistrar returns a Registrar for cfg.
func NewRegistrar(cfg RegistrarConfig) *Registrar {
	if cfg.StatusUpdateFrequency <= 0 {
		cfg.StatusUpdateFrequency = 10 * time.Second
	}
	if cfg.StatusReportFrequency <= 0 {
		cfg.StatusReportFrequency = 5 * time.Minute
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 40 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Ready == nil {
		cfg.Ready = func() error { return nil }
	}
	if cfg.HeartbeatClient == nil {
		cfg.HeartbeatClient = cfg.Client
	}
	return &Registrar{cfg: cfg, log: cfg.Logger, after: time.After}
}

// Node returns the registered Node (with its UID) once registration succeeded.
func (r *Registrar) Node() (*v1.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered, r.registered != nil
}

// Run registers the node (retrying with back-off until it succeeds), then
// posts the node status and renews the Lease until ctx is done.
func (r *Registrar) Run(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		err := r.register(ctx)
		if err == nil {
			break
		}
		r.log.Error("registering the node failed; retrying", "node", r.cfg.Node.Name, "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 7*time.Second)
	}
	// The Lease is renewed on its own cadence, as the kubelet's lease
	// controller does: a status post that takes long delays no renewal.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.renewLeases(ctx)
	}()
	defer wg.Wait()
	status := time.NewTicker(r.cfg.StatusUpdateFrequency)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-status.C:
			if err := r.UpdateStatus(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("updating node status failed", "node", r.cfg.Node.Name, "error", err)
			}
		}
	}
}

// register creates the Node, or adopts an existing one of the same name
// (a restarted agent), then posts its status.
func (r *Registrar) register(ctx context.Context) error {
	want := r.cfg.Node.DeepCopy()
	want.Status = r.status(nil)
	nodes := r.cfg.Client.CoreV1().Nodes()
	var created *v1.Node
	var err error
	if r.cfg.NoCreate {
		// As an existing Node: its labels are brought up to date below.
		err = apierrors.NewAlreadyExists(v1.Resource("nodes"), want.Name)
	} else {
		created, err = nodes.Create(ctx, want, metav1.CreateOptions{})
	}
	switch {
	case err == nil:
		r.log.Info("node registered", "node", created.Name, "uid", created.UID)
	case apierrors.IsAlreadyExists(err):
		created, err = nodes.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && r.cfg.NoCreate {
			return fmt.Errorf("node %s: not found, and registerNode is false: waiting for it to be created", want.Name)
		}
		if err != nil {
			return fmt.Errorf("node %s: get existing: %w", want.Name, err)
		}
		r.log.Info("node already registered; adopting it", "node", created.Name, "uid", created.UID)
		// Labels this agent owns are brought up to date.
		if patch := labelPatch(created.Labels, want.Labels); patch != nil {
			if created, err = nodes.Patch(ctx, want.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("node %s: labels: %w", want.Name, err)
			}
		}
	default:
		return fmt.Errorf("node %s: create: %w", want.Name, err)
	}
	r.mu.Lock()
	r.registered = created
	r.mu.Unlock()
	// The status sent on create is dropped by the API server (status is a
	// subresource): post it now.
	return r.postStatus(ctx, r.status(&created.Status))
}

func labelPatch(have, want map[string]string) []byte {
	diff := map[string]string{}
	for k, v := range want {
		if have[k] != v {
			diff[k] = v
		}
	}
	if len(diff) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": diff}})
	return b
}

// UpdateStatus computes the node status and posts it when it changed (heart
// beat times aside) or StatusReportFrequency has passed since the last post.
func (r *Registrar) UpdateStatus(ctx context.Context) error {
	r.mu.Lock()
	prev, at := r.sent, r.sentAt
	r.mu.Unlock()
	next := r.status(prev)
	if prev != nil && r.cfg.Now().Sub(at) < r.cfg.StatusReportFrequency && sameStatus(prev, &next) {
		return nil
	}
	return r.postStatus(ctx, next)
}

func (r *Registrar) postStatus(ctx context.Context, s v1.NodeStatus) error {
	patch, err := json.Marshal(map[string]any{"status": s})
	if err != nil {
		return err
	}
	n, err := r.cfg.HeartbeatClient.CoreV1().Nodes().Patch(ctx, r.cfg.Node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("node %s: patch status: %w", r.cfg.Node.Name, err)
	}
	r.mu.Lock()
	r.registered, r.sent, r.sentAt = n, &s, r.cfg.Now()
	r.mu.Unlock()
	return nil
}

// sameStatus compares two statuses without the conditions' heartbeat times.
func sameStatus(a, b *v1.NodeStatus) bool {
	strip := func(s *v1.NodeStatus) *v1.NodeStatus {
		c := s.DeepCopy()
		for i := range c.Conditions {
			c.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// status is the node's status now; prev (the last one posted) keeps the
// conditions' transition times.
func (r *Registrar) status(prev *v1.NodeStatus) v1.NodeStatus {
	now := metav1.NewTime(r.cfg.Now().Truncate(time.Second))
	s := *r.cfg.Node.Status.DeepCopy()
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "wasmlet is posting ready status"}
	if err := r.cfg.Ready(); err != nil {
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "KubeletNotReady", err.Error()
	}
	var pressure []v1.NodeConditionType
	if r.cfg.Pressure != nil {
		pressure = r.cfg.Pressure()
	}
	s.Conditions = append(pressureConditions(pressure), ready)
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		if prev == nil {
			continue
		}
		for _, p := range prev.Conditions {
			if p.Type == c.Type && p.Status == c.Status {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	if r.cfg.RuntimeHandlers != nil {
		s.RuntimeHandlers = r.cfg.RuntimeHandlers()
	}
	AddExtendedResources(&s, r.cfg.ExtendedResources)
	if prev != nil {
		s.Images, s.VolumesInUse, s.VolumesAttached = prev.Images, prev.VolumesInUse, prev.VolumesAttached
	}
	return s
}

// pressureConditions are the kubelet's three pressure conditions, True
// for those in pressure, with its reasons and messages.
func pressureConditions(pressure []v1.NodeConditionType) []v1.NodeCondition {
	out := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "wasmlet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "wasmlet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "wasmlet has sufficient PID available"},
	}
	under := map[v1.NodeConditionType][2]string{
		v1.NodeMemoryPressure: {"KubeletHasInsufficientMemory", "wasmlet has insufficient memory available"},
		v1.NodeDiskPressure:   {"KubeletHasDiskPressure", "wasmlet has disk pressure"},
		v1.NodePIDPressure:    {"KubeletHasInsufficientPID", "wasmlet has insufficient PID available"},
	}
	for i := range out {
		if slices.Contains(pressure, out[i].Type) {
			rm := under[out[i].Type]
			out[i].Status, out[i].Reason, out[i].Message = v1.ConditionTrue, rm[0], rm[1]
		}
	}
	return out
}

// renewLeases renews the Lease until ctx is done, as the kubelet's lease
// controller does: at once, then a quarter of the lease duration after each
// renewal ends, lengthened by up to leaseJitter at random. Counted from the
// end, a renewal the API server answered late is not followed at once by
// the next; the jitter lets nodes that started together drift apart
// instead of renewing in step for as long as they run.
func (r *Registrar) renewLeases(ctx context.Context) {
	interval := r.cfg.LeaseDuration / 4
	for {
		r.renewLease(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.after(wait.Jitter(interval, leaseJitter)):
		}
	}
}

// renewLease creates or renews the node's Lease, owned by the Node so it
// goes when the Node goes.
func (r *Registrar) renewLease(ctx context.Context) {
	if err := r.tryRenewLease(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("renewing the node lease failed", "node", r.cfg.Node.Name, "error", err)
	}
}

func (r *Registrar) tryRenewLease(ctx context.Context) error {
	leases := r.cfg.HeartbeatClient.CoordinationV1().Leases(LeaseNamespace)
	name := r.cfg.Node.Name
	now := metav1.NewMicroTime(r.cfg.Now())
	r.mu.Lock()
	l, n := r.lease, r.registered
	r.mu.Unlock()
	create := false
	if l == nil {
		got, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l, create = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: LeaseNamespace}}, true
		case err != nil:
			return fmt.Errorf("lease %s/%s: %w", LeaseNamespace, name, err)
		default:
			l = got
		}
	}
	l = l.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.cfg.LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	if n != nil && n.UID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	var err error
	if create {
		l, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		r.mu.Lock()
		r.lease = nil // read it again next time (conflict, or deleted)
		r.mu.Unlock()
		return fmt.Errorf("lease %s/%s: %w", LeaseNamespace, name, err)
	}
	r.mu.Lock()
	r.lease = l
	r.mu.Unlock()
	return nil
}
