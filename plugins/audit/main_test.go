//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

func TestAudit_Hook(t *testing.T) {
	var lines []string
	prev := sdk.UseNativeHost(&sdk.NativeHost{Log: func(_ sdk.LogLevel, msg string) { lines = append(lines, msg) }})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
	pod := sdk.Pod{ObjectMeta: sdk.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	code := int32(137)
	for _, pt := range sdk.HookPoints {
		req := sdk.HookRequest{Point: pt, Pod: pod}
		if pt != sdk.HookPreSandbox && pt != sdk.HookPodTerminated {
			req.Container = &sdk.Container{Name: "c", Image: "nginx"}
		}
		if pt == sdk.HookPostStop {
			req.ExitCode, req.Reason = &code, "OOMKilled"
		}
		adj, err := audit{}.Hook(req)
		if err != nil || !adj.Empty() {
			t.Fatalf("%s: %+v %v", pt, adj, err)
		}
	}
	want := map[int]string{
		1: "audit: PreCreate pod default/web uid u1 container c image nginx",
		6: "audit: PostStop pod default/web uid u1 container c image nginx exit code 137 reason OOMKilled",
		7: "audit: PodTerminated pod default/web uid u1",
	}
	if len(lines) != len(sdk.HookPoints) {
		t.Fatalf("%d lines, want %d: %q", len(lines), len(sdk.HookPoints), lines)
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
}

// TestAudit_Points checks the manifest calls audit at every point.
func TestAudit_Points(t *testing.T) {
	m, err := fixture.ReadManifest(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range sdk.HookPoints {
		if !m.CallsAt(pt) {
			t.Errorf("the manifest's points %v leave out %s", m.Points, pt)
		}
	}
}
