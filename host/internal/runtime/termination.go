package runtime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// termination is the order a terminating pod's containers stop in, as the
// kubelet orders it since sidecars: the regular containers first, all at
// once; each sidecar (restartable init container) only once every regular
// container and every sidecar declared after it has stopped, so sidecars
// stop in reverse order and outlive what uses them. A container that is
// not running does not hold anything up. Waiting is bounded by the
// container's grace period: once it is spent, the container is stopped
// whatever is still running.
type termination struct {
	// done is closed when the container of that name has stopped.
	done map[string]chan struct{}
	// after lists what a sidecar waits for.
	after map[string][]chan struct{}
}

// newTermination orders pod's containers; live are the ones to stop.
func newTermination(pod *v1.Pod, live []*container.ContainerStatus) *termination {
	t := &termination{done: map[string]chan struct{}{}, after: map[string][]chan struct{}{}}
	running := map[string]bool{}
	for _, cs := range live {
		running[cs.Name] = true
	}
	gate := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !running[name] {
			close(ch)
		}
		t.done[name] = ch
		return ch
	}
	var regular []chan struct{}
	for _, c := range pod.Spec.Containers {
		regular = append(regular, gate(c.Name))
	}
	// Every sidecar declared after this one: waiting on all of them, not
	// only the next, keeps the order when one of them is not running.
	var later []chan struct{}
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := gate(c.Name)
		if !container.IsSidecar(c) {
			continue
		}
		t.after[c.Name] = append(append([]chan struct{}{}, regular...), later...)
		later = append(later, ch)
	}
	return t
}

// waitTurn waits until what the container named name waits for has
// stopped, at most grace (or until ctx is done), and returns how long it
// waited.
func (t *termination) waitTurn(ctx context.Context, name string, grace time.Duration) time.Duration {
	start := time.Now()
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for _, ch := range t.after[name] {
		select {
		case <-ch:
		case <-deadline.C:
			return time.Since(start)
		case <-ctx.Done():
			return time.Since(start)
		}
	}
	return time.Since(start)
}

// stopped records that the container named name has stopped (or failed
// to; nothing waits on it any longer).
func (t *termination) stopped(name string) {
	if ch, ok := t.done[name]; ok {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}
