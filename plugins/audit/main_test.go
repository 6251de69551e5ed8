//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
)

func TestAudit_Hook(t *testing.T) {
	var lines []string
	prev := sdk.UseNativeHost(&sdk.NativeHost{Log: func(_ sdk.LogLevel, msg string) { lines = append(lines, msg) }})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
	pod := sdk.Pod{ObjectMeta: sdk.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	for _, pt := range sdk.HookPoints {
		req := sdk.HookRequest{Point: pt, Pod: pod}
		if pt != sdk.HookPreSandbox && pt != sdk.HookPodTerminated {
			req.Container = &sdk.Container{Name: "c", Image: "nginx"}
		}
		adj, err := audit{}.Hook(req)
		if err != nil || adj.Env != nil || adj.Labels != nil {
			t.Fatalf("%s: %+v %v", pt, adj, err)
		}
	}
	if len(lines) != len(sdk.HookPoints) {
		t.Fatalf("%d lines, want %d: %q", len(lines), len(sdk.HookPoints), lines)
	}
	if want := "audit: PreCreate pod default/web uid u1 container c image nginx"; lines[1] != want {
		t.Errorf("line = %q, want %q", lines[1], want)
	}
	if want := "audit: PodTerminated pod default/web uid u1"; lines[4] != want {
		t.Errorf("line = %q, want %q", lines[4], want)
	}
}
