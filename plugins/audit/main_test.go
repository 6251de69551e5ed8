//go:build !wasip1

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

func TestAudit_Hook(t *testing.T) {
	var lines []string
	prev := sdk.UseNativeHost(&sdk.NativeHost{Log: func(_ sdk.LogLevel, msg string) { lines = append(lines, msg) }})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
	pod := sdk.Pod{ObjectMeta: sdk.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	for _, pt := range abi.HookPoints {
		req := sdk.HookRequest{Point: pt, Pod: pod}
		if pt != abi.HookPreSandbox && pt != abi.HookPodTerminated {
			req.Container = &sdk.Container{Name: "c", Image: "nginx"}
		}
		adj, err := audit{}.Hook(req)
		if err != nil || adj.Env != nil || adj.Labels != nil {
			t.Fatalf("%s: %+v %v", pt, adj, err)
		}
	}
	if len(lines) != len(abi.HookPoints) {
		t.Fatalf("%d lines, want %d: %q", len(lines), len(abi.HookPoints), lines)
	}
	if want := "audit: PreCreate pod default/web uid u1 container c image nginx"; lines[1] != want {
		t.Errorf("line = %q, want %q", lines[1], want)
	}
	if want := "audit: PodTerminated pod default/web uid u1"; lines[4] != want {
		t.Errorf("line = %q, want %q", lines[4], want)
	}
}

// TestAudit_Wasm checks the compiled module logs through the host's log.
func TestAudit_Wasm(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug})
	p := sdktest.LoadWith(t, plugin.LoadConfig{Path: sdktest.Build(t, "."), Config: plugin.Config{Logger: log}})
	pod, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "u1"}})
	if _, err := p.Hook(abi.HookRequest{Point: abi.HookPostStart, Pod: pod, Container: json.RawMessage(`{"name":"c","image":"nginx"}`)}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "audit: PostStart pod default/web uid u1 container c image nginx") || !strings.Contains(out, "plugin.audit") {
		t.Fatalf("host log lacks the audit line:\n%s", out)
	}
}
