package wasiruntime

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A spinning module's CPU time grows and its linear memory is reported; a
// sleeping one is listed beside it, an exited one is not.
func TestRuntime_ContainerStats(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb, sbCfg := h.sandbox(t, "s", nil)
	spin := h.run(t, sb, sbCfg, "spin", []string{"spin"}, nil)
	sleep := h.run(t, sb, sbCfg, "sleep", []string{"sleep", "1h"}, nil)
	done := h.run(t, sb, sbCfg, "done", []string{"echo", "bye"}, nil)
	h.waitExit(t, done, 30*time.Second)

	cpu := func() uint64 {
		st, err := h.rs.ContainerStats(ctx, spin)
		if err != nil {
			t.Fatal(err)
		}
		if st.Cpu == nil || st.Memory == nil || st.Memory.WorkingSetBytes.GetValue() == 0 || st.Memory.WorkingSetBytes.GetValue()%65536 != 0 {
			t.Fatalf("spinning module stats %v: want CPU and a linear memory of whole 64 KiB pages", st)
		}
		return st.Cpu.UsageCoreNanoSeconds.GetValue()
	}
	first := cpu()
	deadline := time.Now().Add(60 * time.Second)
	for cpu() <= first {
		if time.Now().After(deadline) {
			t.Fatalf("the spinning module's CPU time stays at %d ns", first)
		}
		time.Sleep(50 * time.Millisecond)
	}

	all, err := h.rs.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range all {
		got[s.Attributes.Id] = true
	}
	if len(all) != 2 || !got[spin] || !got[sleep] {
		t.Errorf("ListContainerStats: %v, want the two running containers", got)
	}
	if _, err := h.rs.ContainerStats(ctx, "nope"); status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStats of an unknown container = %v, want NotFound", err)
	}
}

// A container's scratch root is its writable layer: what it writes to its
// own file system shows in its stats (refreshed every 10 s, so polled).
func TestRuntime_ContainerStats_writableLayer(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb, sbCfg := h.sandbox(t, "s", nil)
	id := h.run(t, sb, sbCfg, "fill", []string{"fill", "/big", "2", ";", "sleep", "1h"}, nil)
	var used, inodes uint64
	deadline := time.Now().Add(2 * time.Minute)
	for used < 2<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("writable layer stays at %d bytes, want the 2 MiB written", used)
		}
		time.Sleep(100 * time.Millisecond)
		st, err := h.rs.ContainerStats(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		w := st.WritableLayer
		if w == nil || w.FsId.GetMountpoint() == "" || w.UsedBytes == nil || w.InodesUsed == nil {
			t.Fatalf("writable layer %v, want the scratch root's usage", w)
		}
		used, inodes = w.UsedBytes.GetValue(), w.InodesUsed.GetValue()
	}
	if inodes < 2 {
		t.Errorf("writable layer of %d inodes, want the root directory and the file at least", inodes)
	}
}

// A ready sandbox's stats are its running containers' stats and their
// sums; a stopped sandbox is not listed, and the filter's labels select.
func TestRuntime_PodSandboxStats(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, aCfg := h.sandbox(t, "a", map[string]string{"app": "a"})
	b, bCfg := h.sandbox(t, "b", map[string]string{"app": "b"})
	stopped, _ := h.sandbox(t, "stopped", map[string]string{"app": "a"})
	if err := h.rs.StopPodSandbox(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	one := h.run(t, a, aCfg, "one", []string{"sleep", "1h"}, nil)
	two := h.run(t, a, aCfg, "two", []string{"sleep", "1h"}, nil)
	h.run(t, b, bCfg, "three", []string{"sleep", "1h"}, nil)
	done := h.run(t, a, aCfg, "done", []string{"echo", "bye"}, nil)
	h.waitExit(t, done, 30*time.Second)

	st, err := h.rs.PodSandboxStats(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Attributes.GetId() != a || st.Attributes.GetMetadata().GetName() != "a" {
		t.Errorf("attributes %v, want sandbox %s named a", st.Attributes, a)
	}
	got := map[string]bool{}
	var mem uint64
	for _, c := range st.GetLinux().GetContainers() {
		got[c.Attributes.Id] = true
		mem += c.GetMemory().GetWorkingSetBytes().GetValue()
	}
	if len(got) != 2 || !got[one] || !got[two] {
		t.Errorf("sandbox a's container stats %v, want its two running containers", got)
	}
	if m := st.GetLinux().GetMemory().GetWorkingSetBytes().GetValue(); m == 0 || m != mem {
		t.Errorf("sandbox a's working set %d, want its containers' sum %d (not zero)", m, mem)
	}
	if st.GetLinux().GetCpu().GetUsageCoreNanoSeconds() == nil {
		t.Errorf("sandbox a has no CPU usage")
	}

	list, err := h.rs.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range list {
		ids[s.Attributes.Id] = true
	}
	if len(ids) != 2 || !ids[a] || !ids[b] {
		t.Errorf("ListPodSandboxStats: %v, want the two ready sandboxes %s and %s", ids, a, b)
	}
	list, err = h.rs.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{LabelSelector: map[string]string{"app": "b"}})
	if err != nil || len(list) != 1 || list[0].Attributes.Id != b {
		t.Errorf("ListPodSandboxStats app=b: %v, %v; want sandbox %s alone", list, err, b)
	}
	for _, id := range []string{stopped, "nope"} {
		if _, err := h.rs.PodSandboxStats(ctx, id); status.Code(err) != codes.NotFound {
			t.Errorf("PodSandboxStats(%s) = %v, want NotFound", id, err)
		}
	}
}
