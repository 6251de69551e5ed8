package worker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/config"
)

// staticHarness runs pod workers whose sync function logs what it does:
// "sync U" for a pod's first Sync, "terminate U" when its kill starts and
// "killed U" when the test releases it, "terminated U" from the Terminated
// callback and "wait U" each time a static pod's worker waits for its name.
type staticHarness struct {
	t *testing.T
	w *Workers

	mu      sync.Mutex
	log     []string
	release map[types.UID]chan struct{}
}

func newStaticHarness(t *testing.T) *staticHarness {
	h := &staticHarness{t: t, release: map[types.UID]chan struct{}{}}
	w, err := New(Config{SyncFunc: h.sync, Terminated: func(p *v1.Pod) { h.add("terminated", p.UID) }})
	if err != nil {
		t.Fatal(err)
	}
	w.waited = func(uid types.UID) { h.add("wait", uid) }
	h.w = w
	t.Cleanup(func() {
		h.mu.Lock()
		for _, c := range h.release {
			select {
			case <-c:
			default:
				close(c)
			}
		}
		h.mu.Unlock()
		w.Stop()
	})
	return h
}

func (h *staticHarness) add(what string, uid types.UID) {
	h.mu.Lock()
	h.log = append(h.log, what+" "+string(uid))
	h.mu.Unlock()
}

// gate is the channel that releases uid's kill.
func (h *staticHarness) gate(uid types.UID) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.release[uid]
	if !ok {
		c = make(chan struct{})
		h.release[uid] = c
	}
	return c
}

func (h *staticHarness) sync(ctx context.Context, w Work) error {
	if w.Kind == Sync {
		if w.First {
			h.add("sync", w.Pod.UID)
		}
		return nil
	}
	h.add("terminate", w.Pod.UID)
	select {
	case <-h.gate(w.Pod.UID):
	case <-ctx.Done():
		return ctx.Err()
	}
	h.add("killed", w.Pod.UID)
	return nil
}

func (h *staticHarness) snapshot() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.log...)
}

// await polls the log for event until a deadline.
func (h *staticHarness) await(event string) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(h.snapshot(), event) {
		if time.Now().After(deadline) {
			h.t.Fatalf("no %q; log %v", event, h.snapshot())
		}
		time.Sleep(time.Millisecond)
	}
}

// namedPod is a pod named name in default; static when from the file source.
func namedPod(uid, name string, static bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img-" + uid}}}}
	if static {
		p.Annotations = map[string]string{config.AnnotationSource: "file"}
	}
	return p
}

// step is one action of a static pod scenario: "add" hands the pod a Sync,
// "terminate" a Terminate, "release" lets its kill finish, "await" waits
// for the log event arg, "waits" checks Workers.Waits against arg
// ("true"/"false"), "started" checks the UIDs of StartedStaticPods
// (comma-separated, sorted).
type step struct {
	do, uid, arg string
}

func TestWorkers_Update_staticPodWaitsForItsName(t *testing.T) {
	// a, b and c are static pods named web (a changed manifest gives a new
	// UID, the name stays); d is a static pod named other; n is an API pod
	// named web.
	pods := func() map[string]*v1.Pod {
		return map[string]*v1.Pod{
			"a": namedPod("a", "web", true), "b": namedPod("b", "web", true), "c": namedPod("c", "web", true),
			"d": namedPod("d", "other", true), "n": namedPod("n", "web", false),
		}
	}
	started := []step{{"add", "a", ""}, {"await", "", "sync a"}}
	killing := append(slices.Clone(started), step{"terminate", "a", ""}, step{"await", "", "terminate a"})
	for _, c := range []struct {
		name  string
		steps []step
		// before are pairs of events of which the first must be logged
		// before the second.
		before [][2]string
		// never are events that must not be logged.
		never []string
	}{
		{
			name: "replacement waits until the replaced pod is killed",
			steps: append(slices.Clone(killing),
				step{"waits", "b", "true"},
				step{"add", "b", ""}, step{"await", "", "wait b"},
				step{"waits", "b", "true"}, step{"started", "", "a"},
				step{"release", "a", ""}, step{"await", "", "sync b"},
				step{"waits", "b", "false"}, step{"started", "", "b"}),
			before: [][2]string{{"killed a", "sync b"}},
		},
		{
			name: "replacement added before the replaced pod is asked to terminate waits too",
			steps: append(slices.Clone(started),
				step{"add", "b", ""}, step{"await", "", "wait b"},
				step{"terminate", "a", ""}, step{"await", "", "terminate a"},
				step{"release", "a", ""}, step{"await", "", "sync b"}),
			before: [][2]string{{"killed a", "sync b"}},
		},
		{
			name: "pods waiting for one name start one at a time in arrival order",
			steps: append(slices.Clone(killing),
				step{"add", "b", ""}, step{"await", "", "wait b"},
				step{"add", "c", ""}, step{"await", "", "wait c"},
				step{"waits", "c", "true"},
				step{"release", "a", ""}, step{"await", "", "sync b"},
				step{"waits", "c", "true"}, step{"started", "", "b"},
				step{"terminate", "b", ""}, step{"await", "", "terminate b"},
				step{"release", "b", ""}, step{"await", "", "sync c"}),
			before: [][2]string{{"killed a", "sync b"}, {"killed b", "sync c"}},
		},
		{
			name: "pod terminated while waiting never runs and keeps no one waiting",
			steps: append(slices.Clone(killing),
				step{"add", "b", ""}, step{"await", "", "wait b"},
				step{"add", "c", ""}, step{"await", "", "wait c"},
				step{"terminate", "b", ""}, step{"await", "", "terminated b"},
				step{"started", "", "a"},
				step{"release", "a", ""}, step{"await", "", "sync c"}),
			before: [][2]string{{"killed a", "sync c"}},
			never:  []string{"sync b", "terminate b"},
		},
		{
			name: "static pods of other names and API pods do not wait",
			steps: append(slices.Clone(killing),
				step{"waits", "d", "false"}, step{"waits", "n", "false"},
				step{"add", "d", ""}, step{"await", "", "sync d"},
				step{"add", "n", ""}, step{"await", "", "sync n"},
				step{"started", "", "a,d"},
				step{"release", "a", ""}, step{"await", "", "terminated a"},
				step{"started", "", "d"}),
			never: []string{"wait d", "wait n"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newStaticHarness(t)
			ps := pods()
			for i, s := range c.steps {
				switch s.do {
				case "add":
					h.w.Update(Update{Pod: ps[s.uid], Kind: Sync, Recreate: true})
				case "terminate":
					h.w.Update(Update{Pod: ps[s.uid], Kind: Terminate})
				case "release":
					close(h.gate(types.UID(s.uid)))
				case "await":
					h.await(s.arg)
				case "waits":
					if got := fmt.Sprint(h.w.Waits(ps[s.uid])); got != s.arg {
						t.Errorf("step %d: Waits(%s) = %s, want %s; log %v", i, s.uid, got, s.arg, h.snapshot())
					}
				case "started":
					var uids []string
					for _, p := range h.w.StartedStaticPods() {
						uids = append(uids, string(p.UID))
					}
					sort.Strings(uids)
					if got := strings.Join(uids, ","); got != s.arg {
						t.Errorf("step %d: StartedStaticPods = %q, want %q", i, got, s.arg)
					}
				default:
					t.Fatalf("step %d: unknown %q", i, s.do)
				}
			}
			log := h.snapshot()
			for _, b := range c.before {
				i, j := slices.Index(log, b[0]), slices.Index(log, b[1])
				if i < 0 || j < 0 || i > j {
					t.Errorf("want %q before %q; log %v", b[0], b[1], log)
				}
			}
			for _, e := range c.never {
				if slices.Contains(log, e) {
					t.Errorf("%q logged; log %v", e, log)
				}
			}
		})
	}
}
