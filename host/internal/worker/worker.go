// Package worker runs the pod workers, a simplified form of the kubelet's
// pod_workers.go: one goroutine per pod, updates coalesce (the newest pending
// update wins), a periodic resync, back-off after a failed sync, and
// termination — a kill request with a grace period that only ever shrinks,
// after which the worker ends and the pod is forgotten.
//
// As the kubelet's allowStaticPodStart, a static pod does not start while
// another static pod of its full name (name_namespace) has started and not
// yet terminated — a changed manifest gives the pod a new UID but the same
// name: its worker waits, running nothing, and the pods waiting for a name
// start one at a time in the order they arrived. A static pod asked to
// terminate before it started never runs.
package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kind says what a Work asks of the sync function.
type Kind int

const (
	// Sync brings the pod to its desired state.
	Sync Kind = iota
	// Terminate stops every container and the sandbox of the pod within
	// Work.GracePeriod.
	Terminate
)

func (k Kind) String() string {
	if k == Terminate {
		return "terminate"
	}
	return "sync"
}

// Work is one call of the sync function.
type Work struct {
	// Kind is Sync or Terminate.
	Kind Kind
	// Pod is the newest pod given to Update; the sync function must not
	// modify it.
	Pod *v1.Pod
	// GracePeriod is the effective grace period of a Terminate (at least 1 s).
	GracePeriod time.Duration
	// First is true for the first Sync of this pod by this worker.
	First bool
	// Failure, with Terminate, is the terminal status the node gives the
	// pod it kills (an eviction); nil for an ordinary kill.
	Failure *Failure
}

// Failure is why the node itself ends a pod (the kubelet's
// KillPodOptions.PodStatusFunc of an eviction): the pod's status becomes
// phase Failed with Reason and Message before it is killed.
type Failure struct {
	// Reason is the status reason, e.g. "Evicted".
	Reason string
	// Message is the status message.
	Message string
	// Condition, when set, is added to the pod's conditions (an
	// eviction's DisruptionTarget).
	Condition *v1.PodCondition
}

// Update asks the worker of a pod for work.
type Update struct {
	// Pod is the pod; its UID selects the worker.
	Pod *v1.Pod
	// Kind is Sync or Terminate. Once a pod is terminating, Sync updates
	// only replace the pod object.
	Kind Kind
	// GracePeriodOverride, when set with Terminate, replaces the pod's
	// grace period (seconds); the effective grace period only ever shrinks.
	GracePeriodOverride *int64
	// Failure, with Terminate, fails the pod with this reason and message;
	// the first Failure given to a terminating pod is kept.
	Failure *Failure
	// Recreate, with Sync, says the pod's source added it (again): if it
	// is terminating (its static pod manifest was removed and has come
	// back), it starts over once the termination is done, as the kubelet
	// restarts a terminated-and-recreated pod. A later Terminate cancels it.
	Recreate bool
}

// Config configures the pod workers.
type Config struct {
	// SyncFunc is called by a pod's worker, never concurrently for one pod.
	// Its ctx is cancelled when the pod is asked to terminate during a Sync,
	// or when Stop is called. A Terminate that returns nil ends the worker.
	SyncFunc func(ctx context.Context, w Work) error
	// Terminated, if set, is called from the worker once its pod is
	// terminated, just before the worker is forgotten.
	Terminated func(pod *v1.Pod)
	// ResyncInterval is the period of a pod's resync after a successful
	// Sync, jittered by up to +50 %; 0 disables the resync.
	ResyncInterval time.Duration
	// BackOff is the delay before retrying a failed sync; it doubles after
	// each failure up to MaxBackOff. Defaults: 1 s and 10 s. An Update
	// does not wait for the back-off.
	BackOff, MaxBackOff time.Duration
	// Logger receives sync errors; nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_pod_worker_duration_seconds; nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// Workers is the set of pod workers. Create it with New; it is safe for
// concurrent use.
type Workers struct {
	cfg      Config
	log      hclog.Logger
	duration *prometheus.HistogramVec
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// started is the static pod that holds each full name: started and
	// not yet terminated (the kubelet's startedStaticPodsByFullname).
	started map[string]types.UID
	// waiting are the static pods waiting for each full name, in arrival
	// order (the kubelet's waitingToStartStaticPodsByFullname).
	waiting map[string][]types.UID
	stopped bool
	// waited, when set (by tests), is called each time a static pod's
	// worker finds its full name taken and waits.
	waited func(uid types.UID)
}

// podWorker is one pod's state; its fields are guarded by Workers.mu.
type podWorker struct {
	pod         *v1.Pod
	pending     bool // an Update arrived since the last sync started
	terminating bool
	grace       time.Duration
	failure     *Failure // the Failure of the Terminate, if any
	recreate    bool     // the pod was added again while terminating
	synced      bool     // a Sync has run
	cancel      context.CancelFunc
	running     Kind
	wake        chan struct{}
	fullName    string // a static pod's full name; "" for other pods
	started     bool   // the pod may run (a static pod waits for its name)
}

// New returns the workers of cfg, registering the duration metric.
func New(cfg Config) (*Workers, error) {
	if cfg.SyncFunc == nil {
		return nil, errors.New("worker: Config.SyncFunc is nil")
	}
	if cfg.BackOff <= 0 {
		cfg.BackOff = time.Second
	}
	if cfg.MaxBackOff < cfg.BackOff {
		cfg.MaxBackOff = max(10*time.Second, cfg.BackOff)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	w := &Workers{
		cfg:     cfg,
		log:     cfg.Logger,
		workers: map[types.UID]*podWorker{},
		started: map[string]types.UID{},
		waiting: map[string][]types.UID{},
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmlet_pod_worker_duration_seconds",
			Help:    "Duration of one pod sync by operation (create, update, sync, terminate).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"operation"}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.duration); err != nil {
			return nil, fmt.Errorf("worker: register metrics: %w", err)
		}
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w, nil
}

// Update hands u to the pod's worker, starting one if the pod has none. A
// pending update not yet started is replaced (the newest wins). A Terminate
// cancels a Sync in progress. After Stop it does nothing.
func (w *Workers) Update(u Update) {
	if u.Pod == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	uid := u.Pod.UID
	pw, ok := w.workers[uid]
	if !ok {
		pw = &podWorker{wake: make(chan struct{}, 1), started: true}
		if config.IsStatic(u.Pod) {
			pw.fullName, pw.started = config.FullName(u.Pod), false
			w.waiting[pw.fullName] = append(w.waiting[pw.fullName], uid)
		}
		w.workers[uid] = pw
		w.wg.Add(1)
		go w.run(uid, pw)
	}
	pw.pod = u.Pod
	pw.pending = true
	switch {
	case u.Kind == Sync && u.Recreate && pw.terminating:
		pw.recreate = true
	case u.Kind == Terminate:
		pw.recreate = false
	}
	if u.Kind == Terminate {
		g := GracePeriod(u.Pod, u.GracePeriodOverride)
		if !pw.terminating || g < pw.grace {
			pw.grace = g
		}
		pw.terminating = true
		if pw.failure == nil {
			pw.failure = u.Failure
		}
		if pw.cancel != nil && pw.running == Sync {
			pw.cancel()
		}
	}
	select {
	case pw.wake <- struct{}{}:
	default:
	}
}

// IsTerminating reports whether the pod has been asked to terminate and its
// worker has not finished yet.
func (w *Workers) IsTerminating(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw, ok := w.workers[uid]
	return ok && pw.terminating
}

// StartedStaticPods returns the static pods that have started and not yet
// terminated, running or terminating: each holds its full name, so a
// static pod replacing it (a changed manifest) waits, and so does the
// replacement of its mirror pod.
func (w *Workers) StartedStaticPods() []*v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*v1.Pod, 0, len(w.started))
	for _, uid := range w.started {
		out = append(out, w.workers[uid].pod)
	}
	return out
}

// Waits reports whether pod, handed to its worker now, would wait to
// start: it is a static pod and another static pod of its full name has
// started and not terminated, or arrived before it and still waits. A pod
// whose worker already runs it does not wait.
func (w *Workers) Waits(pod *v1.Pod) bool {
	if !config.IsStatic(pod) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if pw, ok := w.workers[pod.UID]; ok {
		return !pw.started
	}
	return w.inLineBefore(config.FullName(pod), pod.UID)
}

// inLineBefore reports whether another static pod holds fullName or waits
// for it ahead of uid (a pod terminated while waiting does not count).
// w.mu is held.
func (w *Workers) inLineBefore(fullName string, uid types.UID) bool {
	if holder, ok := w.started[fullName]; ok {
		return holder != uid
	}
	for _, q := range w.waiting[fullName] {
		if q == uid {
			return false
		}
		if qw, ok := w.workers[q]; ok && !qw.terminating {
			return true
		}
	}
	return false
}

// allowStart lets the static pod uid, waiting, start if no other pod is
// before it in line for fullName: it leaves the line and holds the name.
// w.mu is held.
func (w *Workers) allowStart(fullName string, uid types.UID) bool {
	if w.inLineBefore(fullName, uid) {
		return false
	}
	w.leaveLine(fullName, uid)
	w.started[fullName] = uid
	return true
}

// leaveLine takes uid out of the pods waiting for fullName. w.mu is held.
func (w *Workers) leaveLine(fullName string, uid types.UID) {
	q := w.waiting[fullName]
	for i, x := range q {
		if x == uid {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(w.waiting, fullName)
		return
	}
	w.waiting[fullName] = q
}

// release frees fullName if uid holds it and wakes the pods waiting for
// it, the first of which starts. w.mu is held.
func (w *Workers) release(fullName string, uid types.UID) {
	if fullName == "" {
		return
	}
	if w.started[fullName] == uid {
		delete(w.started, fullName)
	}
	for _, q := range w.waiting[fullName] {
		if qw, ok := w.workers[q]; ok {
			select {
			case qw.wake <- struct{}{}:
			default:
			}
		}
	}
}

// Known returns the UIDs of the pods that have a worker.
func (w *Workers) Known() []types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.UID, 0, len(w.workers))
	for uid := range w.workers {
		out = append(out, uid)
	}
	return out
}

// Stop cancels every sync in progress and waits for the workers to end.
func (w *Workers) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// GracePeriod is the kubelet's effective grace period of a pod being killed:
// the override when given, else DeletionGracePeriodSeconds when the pod is
// being deleted, else TerminationGracePeriodSeconds, else 30 s; never less
// than 1 s.
func GracePeriod(pod *v1.Pod, override *int64) time.Duration {
	s := int64(30)
	switch {
	case override != nil:
		s = *override
	case pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil:
		s = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		s = *pod.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(max(s, 1)) * time.Second
}

// run is the worker goroutine of one pod.
func (w *Workers) run(uid types.UID, pw *podWorker) {
	defer w.wg.Done()
	var (
		timer    *time.Timer
		timerC   <-chan time.Time
		failures int
	)
	arm := func(d time.Duration) {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		timerC = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		triggered := false
		select {
		case <-pw.wake:
			triggered = true
		case <-timerC:
			timerC = nil
		case <-w.ctx.Done():
			return
		}

		w.mu.Lock()
		if !pw.started {
			if pw.terminating {
				// Asked to terminate before it started: nothing runs, so
				// there is nothing to kill (the kubelet's
				// cleanupUnstartedPod).
				w.leaveLine(pw.fullName, uid)
				w.finish(uid, pw)
				return
			}
			if !w.allowStart(pw.fullName, uid) {
				w.mu.Unlock()
				if w.waited != nil {
					w.waited(uid)
				}
				continue // woken again when the name is released
			}
			pw.started = true
		}
		work := Work{Kind: Sync, Pod: pw.pod, First: !pw.synced}
		if pw.terminating {
			work.Kind, work.GracePeriod, work.First, work.Failure = Terminate, pw.grace, false, pw.failure
		}
		op := operation(work, triggered && pw.pending)
		pw.pending = false
		ctx, cancel := context.WithCancel(w.ctx)
		pw.cancel, pw.running = cancel, work.Kind
		w.mu.Unlock()

		start := time.Now()
		err := w.cfg.SyncFunc(ctx, work)
		w.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
		cancel()

		w.mu.Lock()
		pw.cancel = nil
		if work.Kind == Sync {
			pw.synced = true
		}
		if work.Kind == Terminate && err == nil {
			w.finish(uid, pw)
			return
		}
		// A Terminate that arrived during this Sync runs next, at once.
		again := pw.pending || (pw.terminating && work.Kind == Sync)
		w.mu.Unlock()

		switch {
		case w.ctx.Err() != nil:
			return
		case again:
			failures = 0
			select {
			case pw.wake <- struct{}{}:
			default:
			}
		case err != nil:
			failures++
			d := backOff(w.cfg.BackOff, w.cfg.MaxBackOff, failures)
			w.log.Error("pod sync failed", "pod", podspec.Name(work.Pod), "uid", uid, "kind", work.Kind.String(), "retry_in", d, "error", err)
			arm(d)
		default:
			failures = 0
			if w.cfg.ResyncInterval > 0 && work.Kind == Sync {
				arm(jitter(w.cfg.ResyncInterval))
			}
		}
	}
}

// finish forgets the terminated pod uid, releases its full name, calls
// Terminated, and starts the pod over if it was added again meanwhile. It
// is called with w.mu held and returns with it released.
func (w *Workers) finish(uid types.UID, pw *podWorker) {
	delete(w.workers, uid)
	w.release(pw.fullName, uid)
	recreate, pod := pw.recreate, pw.pod
	w.mu.Unlock()
	if w.cfg.Terminated != nil {
		w.cfg.Terminated(pod)
	}
	if recreate {
		w.Update(Update{Pod: pod, Kind: Sync})
	}
}

func operation(w Work, update bool) string {
	switch {
	case w.Kind == Terminate:
		return "terminate"
	case w.First:
		return "create"
	case update:
		return "update"
	}
	return "sync"
}

func backOff(base, maxD time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < maxD; i++ {
		d *= 2
	}
	return min(d, maxD)
}

func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}
