package main

import (
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Observer watches one fleet's Nodes and Leases (Ready, NotReady, lease
// renewals) and the pods of a run (when each was first seen Running), with
// informers.
type Observer struct {
	mu       sync.Mutex
	names    map[string]bool
	ready    map[string]bool
	notReady map[string]bool
	leases   *Leases
	// observing is false once the fleet is being stopped: what Nodes and
	// Leases do then is not counted.
	observing bool
	// running is when each pod was first seen Running, by name, and its
	// creationTimestamp.
	running map[string]podStart
	pods    map[string]bool
	stop    chan struct{}
}

// podStart is a pod's creationTimestamp, when the observer first saw it
// Running, and when its node says its last container started (the
// containers' state.running.startedAt; zero when none says).
type podStart struct {
	created, running, started time.Time
}

// startedAt is the latest state.running.startedAt of the pod's
// containers, or zero when one is not running.
func startedAt(p *v1.Pod) time.Time {
	var last time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return time.Time{}
		}
		if t := cs.State.Running.StartedAt.Time; t.After(last) {
			last = t
		}
	}
	return last
}

// NewObserver starts watching the nodes in names and the pods labelled
// podLabel=podValue.
func NewObserver(client kubernetes.Interface, names map[string]bool, leases *Leases, podSelector labels.Selector) *Observer {
	o := &Observer{names: names, ready: map[string]bool{}, notReady: map[string]bool{}, leases: leases,
		observing: true, running: map[string]podStart{}, pods: map[string]bool{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactory(client, 0)
	f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.node(obj) },
		UpdateFunc: func(_, obj any) { o.node(obj) },
	})
	lf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("kube-node-lease"))
	lf.Coordination().V1().Leases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.lease(obj) },
		UpdateFunc: func(_, obj any) { o.lease(obj) },
	})
	pf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = podSelector.String()
	}))
	pf.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.pod(obj) },
		UpdateFunc: func(_, obj any) { o.pod(obj) },
		DeleteFunc: func(obj any) { o.podGone(obj) },
	})
	for _, s := range []interface{ Start(<-chan struct{}) }{f, lf, pf} {
		s.Start(o.stop)
	}
	return o
}

// Close stops the informers.
func (o *Observer) Close() { close(o.stop) }

// StopObserving ends the counting of NotReady nodes and lease renewals.
func (o *Observer) StopObserving() {
	o.mu.Lock()
	o.observing = false
	o.mu.Unlock()
}

func (o *Observer) node(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok || !o.names[n.Name] {
		return
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			ready = c.Status == v1.ConditionTrue
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.observing {
		return
	}
	if !ready && o.ready[n.Name] {
		o.notReady[n.Name] = true
	}
	if ready {
		o.ready[n.Name] = true
	}
}

func (o *Observer) lease(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || !o.names[l.Name] || l.Spec.RenewTime == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.observing {
		o.leases.Renewed(l.Name, l.Spec.RenewTime.Time)
	}
}

func (o *Observer) pod(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pods[p.Name] = true
	if _, seen := o.running[p.Name]; !seen && p.Status.Phase == v1.PodRunning {
		o.running[p.Name] = podStart{created: p.CreationTimestamp.Time, running: now, started: startedAt(p)}
	}
}

func (o *Observer) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if p, ok := obj.(*v1.Pod); ok {
		o.mu.Lock()
		delete(o.pods, p.Name)
		o.mu.Unlock()
	}
}

// Ready is how many of the fleet's nodes have been Ready.
func (o *Observer) Ready() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ready)
}

// Leased is how many of the fleet's nodes have been seen with a Lease
// (its renewTime set).
func (o *Observer) Leased() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leases.Nodes()
}

// NotReady is how many nodes went from Ready to not Ready.
func (o *Observer) NotReady() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.notReady)
}

// Running is how many pods have been seen Running, and the number of pods
// the informer holds.
func (o *Observer) Running() (running, pods int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.running), len(o.pods)
}

// Starts is each Running pod's start: from its creationTimestamp (the SLO's
// definition) and from sent, when the benchmark sent its create, to when
// the observer saw it Running; and reported, from its creationTimestamp to
// the last container's startedAt, as its node wrote it (whole seconds
// both), which no lag of the observer's watch can delay.
func (o *Observer) Starts(sent map[string]time.Time) (slo, client, reported []time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, s := range o.running {
		slo = append(slo, s.running.Sub(s.created))
		if t, ok := sent[name]; ok {
			client = append(client, s.running.Sub(t))
		}
		if !s.started.IsZero() {
			reported = append(reported, s.started.Sub(s.created))
		}
	}
	return slo, client, reported
}

// LeaseCounts are the renewals late and missed so far.
func (o *Observer) LeaseCounts() PhaseLeases {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leases.Counts()
}

// LeaseSummary is the lease renewals so far.
func (o *Observer) LeaseSummary() LeaseSummary {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leases.Summary(time.Now())
}
