package runtime

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// blockingPreStop holds every PreStop hook call until release is closed,
// and says on entered when one has begun; it subscribes to no other point.
type blockingPreStop struct {
	entered chan string
	release chan struct{}
}

func (h *blockingPreStop) Validate(context.Context, *v1.Pod, *v1.Container, *runtimeapi.ContainerConfig, *container.Adjustment) error {
	return nil
}

func (h *blockingPreStop) PreUpdate(context.Context, *v1.Pod, *v1.Container, *runtimeapi.LinuxContainerResources) error {
	return nil
}

func (h *blockingPreStop) PostStop(context.Context, *v1.Pod, *v1.Container, container.Exit) error {
	return nil
}

func (h *blockingPreStop) Subscribed(point container.HookPoint) bool {
	return point == container.HookPreStop
}

func (h *blockingPreStop) Hook(ctx context.Context, point container.HookPoint, _ *v1.Pod, c *v1.Container) (*container.Adjustment, error) {
	if point != container.HookPreStop {
		return nil, nil
	}
	h.entered <- c.Name
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil, nil
}

// While a container is being killed for a failed probe (its PreStop hook
// running), a sync of its pod does nothing: a sidecar that exited
// meanwhile is restarted only once the kill is over.
func TestKillContainer_holdsTheSync(t *testing.T) {
	tests := []struct {
		name       string
		killDuring bool // a probe's kill runs while the pod syncs
		wantStart  bool // the exited sidecar is started again by that sync
	}{
		{name: "no kill running: the sidecar restarts", killDuring: false, wantStart: true},
		{name: "a probe's kill running: nothing is started", killDuring: true, wantStart: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, f := newTestManager(t)
			hooks := &blockingPreStop{entered: make(chan string, 1), release: make(chan struct{})}
			m.cfg.Hooks = hooks
			pod := testPod("hold", v1.RestartPolicyNever, "app")
			pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "wasmlet.local/busybox:1.0", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
			grace := int64(60)
			pod.Spec.TerminationGracePeriodSeconds = &grace
			// Three syncs: the sidecar, then the app container beside it.
			var st *container.PodStatus
			for range 3 {
				st, _ = syncOnce(t, m, pod, NewBackOff())
			}
			app, proxy := st.FindContainer("app"), st.FindContainer("proxy")
			if app == nil || app.State != container.StateRunning || proxy == nil || proxy.State != container.StateRunning {
				t.Fatalf("pod not running: %+v", st.Containers)
			}
			exit(f, proxy.ID, 1, time.Now())

			killed := make(chan error, 1)
			if tt.killDuring {
				go func() {
					killed <- m.KillContainer(context.Background(), pod, "app", app.ID, "Container app failed liveness probe", nil)
				}()
				if name := <-hooks.entered; name != "app" {
					t.Fatalf("PreStop of %q, want app", name)
				}
			}
			before := len(f.RuntimeService.GetCalls())
			_, r := syncOnce(t, m, pod, NewBackOff())
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
			started := false
			for _, c := range f.RuntimeService.GetCalls()[before:] {
				if c == "CreateContainer" || c == "StartContainer" {
					started = true
				}
			}
			if started != tt.wantStart {
				t.Errorf("sync during the kill started a container: %v, want %v (calls %v)", started, tt.wantStart, f.RuntimeService.GetCalls()[before:])
			}
			if !tt.killDuring {
				return
			}
			close(hooks.release)
			if err := <-killed; err != nil {
				t.Fatal(err)
			}
			// The kill is over: the next sync restarts the sidecar.
			st, r = syncOnce(t, m, pod, NewBackOff())
			if err := r.Error(); err != nil {
				t.Fatal(err)
			}
			if p := st.FindContainer("proxy"); p == nil || p.State != container.StateRunning {
				t.Errorf("sidecar after the kill: %+v, want running again", p)
			}
		})
	}
}
