package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// countCalls is how often the fake runtime was called for name.
func countCalls(called []string, name string) int {
	n := 0
	for _, c := range called {
		if c == name {
			n++
		}
	}
	return n
}

// A stats call the runtime answers Unimplemented is asked once only; any
// other error of it is asked again at the next Stats.
func TestManager_Stats_unimplementedAskedOnce(t *testing.T) {
	m, f := newTestManager(t)
	ctx := context.Background()
	f.RuntimeService.InjectError("ListPodSandboxStats", grpcstatus.Error(codes.Unimplemented, "no per-pod accounting"))
	f.RuntimeService.InjectError("ListContainerStats", grpcstatus.Error(codes.Unimplemented, "no stats"))
	for i := 0; i < 3; i++ {
		s, err := m.Stats(ctx)
		if err != nil {
			t.Fatalf("Stats #%d: %v", i, err)
		}
		if s.SandboxStats != nil || s.SandboxStatsErr == nil {
			t.Errorf("Stats #%d: sandbox stats %v, error %v; want none, with the reason", i, s.SandboxStats, s.SandboxStatsErr)
		}
	}
	called := f.RuntimeService.GetCalls()
	for _, call := range []string{"ListPodSandboxStats", "ListContainerStats"} {
		if n := countCalls(called, call); n != 1 {
			t.Errorf("%s called %d times over three Stats, want once", call, n)
		}
	}
	if !slices.Contains(called, "ListPodSandbox") {
		t.Errorf("calls %v: the sandboxes were not listed", called)
	}

	m2, f2 := newTestManager(t)
	f2.RuntimeService.InjectError("ListPodSandboxStats", errors.New("cgroup gone"))
	for i := 0; i < 2; i++ {
		if _, err := m2.Stats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := countCalls(f2.RuntimeService.GetCalls(), "ListPodSandboxStats"); n != 2 {
		t.Errorf("after an ordinary error ListPodSandboxStats was called %d times over two Stats, want 2", n)
	}
}
