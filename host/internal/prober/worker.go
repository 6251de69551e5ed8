package prober

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
)

// worker runs one probe of one container, every period, until stopped.
type worker struct {
	m         *Manager
	kind      Kind
	container string
	pod       atomic.Pointer[v1.Pod]
	done      chan struct{}
	trigger   chan struct{} // probe now, not at the next tick
	stopOnce  sync.Once

	// Owned by the worker's goroutine.
	containerID string // the instance being probed
	lastResult  bool
	run1        int  // how many times in a row lastResult came
	onHold      bool // a liveness/startup kill was asked for this instance
}

func newWorker(m *Manager, pod *v1.Pod, container string, kind Kind) *worker {
	w := &worker{m: m, kind: kind, container: container, done: make(chan struct{}), trigger: make(chan struct{}, 1)}
	w.pod.Store(pod)
	return w
}

func (w *worker) setPod(p *v1.Pod) { w.pod.Store(p) }

func (w *worker) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// spec is the container's spec and this worker's probe in the newest pod.
func (w *worker) spec() (*v1.Pod, *v1.Container, *v1.Probe) {
	pod := w.pod.Load()
	for _, c := range probed(pod) {
		if c.Name != w.container {
			continue
		}
		switch w.kind {
		case Liveness:
			return pod, c, c.LivenessProbe
		case Readiness:
			return pod, c, c.ReadinessProbe
		case Startup:
			return pod, c, c.StartupProbe
		}
	}
	return pod, nil, nil
}

func (w *worker) run() {
	_, _, probe := w.spec()
	period := time.Duration(10) * time.Second
	if probe != nil && probe.PeriodSeconds > 0 {
		period = time.Duration(probe.PeriodSeconds) * time.Second
	}
	t := time.NewTicker(period)
	defer t.Stop()
	defer func() {
		if w.containerID != "" {
			w.m.forget(w.containerID, w.kind)
		}
	}()
	for {
		if !w.probeOnce() {
			return
		}
		select {
		case <-w.done:
			return
		case <-t.C:
		case <-w.trigger:
		}
	}
}

// poke makes the worker probe at once (a startup probe just passed, so
// readiness need not wait a whole period).
func (w *worker) poke() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// probeOnce probes once if the container is there, running and due; false
// ends the worker (the pod is finished).
func (w *worker) probeOnce() bool {
	pod, c, probe := w.spec()
	if c == nil || probe == nil {
		return false
	}
	st, ok := w.m.cfg.Statuses.PodStatus(pod.UID)
	if !ok {
		return true
	}
	if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
		return false
	}
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			if list[i].Name == w.container {
				cs = &list[i]
			}
		}
	}
	if cs == nil || cs.ContainerID == "" {
		return true
	}
	if cs.ContainerID != w.containerID {
		// A new instance: start over with the kind's initial result.
		if w.containerID != "" {
			w.m.forget(w.containerID, w.kind)
		}
		w.containerID, w.run1, w.onHold = cs.ContainerID, 0, false
		switch w.kind {
		case Readiness:
			w.m.set(w.containerID, w.kind, false)
		case Liveness:
			w.m.set(w.containerID, w.kind, true)
		}
	}
	if w.onHold {
		return true
	}
	if cs.State.Running == nil {
		if w.kind == Readiness && w.m.set(w.containerID, w.kind, false) {
			w.m.changed(pod)
		}
		return true
	}
	started := w.m.Started(c, w.containerID)
	if w.kind != Startup && !started {
		return true // liveness and readiness wait for the startup probe
	}
	if w.kind == Startup && started {
		return true // a startup probe is done once it succeeded
	}
	if time.Since(cs.State.Running.StartedAt.Time) < time.Duration(probe.InitialDelaySeconds)*time.Second {
		return true
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-w.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	res := w.m.run(ctx, w.kind, pod, c, probe, cs.ContainerID, st.PodIP)
	cancel()
	select {
	case <-w.done:
		return false
	default:
	}
	w.m.count(w.kind, pod, c.Name, res.result)
	switch res.result {
	case resultWarning:
		w.m.event(pod, v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", w.kind, res.output))
	case resultFailure:
		w.m.event(pod, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", w.kind, strings.TrimSpace(res.output)))
	}
	success := res.result != resultFailure
	if success == w.lastResult {
		w.run1++
	} else {
		w.lastResult, w.run1 = success, 1
	}
	threshold := probe.FailureThreshold
	if success {
		threshold = probe.SuccessThreshold
	}
	if threshold <= 0 {
		threshold = 1
		if !success {
			threshold = 3
		}
	}
	if int32(w.run1) < threshold {
		return true
	}
	if w.m.set(w.containerID, w.kind, success) && w.kind != Liveness {
		if w.kind == Startup && success {
			w.m.poke(pod.UID, w.container)
		}
		w.m.changed(pod)
	}
	if !success && (w.kind == Liveness || w.kind == Startup) {
		w.onHold, w.run1 = true, 0
		w.m.kill(pod, c, w.containerID, w.kind, probe)
	}
	return true
}
