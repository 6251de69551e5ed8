//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

// TestDeviceInjector_Fixtures runs tests/*.yaml natively through
// sdk.Handle; wasmlet's root module runs them against the compiled .wasm
// through the real plugin host (plugintest/shipped).
func TestDeviceInjector_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }

// TestInjector_Hook checks that only PreCreate adjusts: the manifest lists
// only PreCreate, and another point given the same pod asks for nothing.
func TestInjector_Hook(t *testing.T) {
	pod := sdk.Pod{ObjectMeta: sdk.ObjectMeta{Annotations: map[string]string{deviceKey: "- path: /dev/fuse"}}}
	for _, pt := range sdk.HookPoints {
		adj, err := injector{}.Hook(sdk.HookRequest{Point: pt, Pod: pod, Container: &sdk.Container{Name: "c"}})
		if err != nil {
			t.Fatalf("%s: %v", pt, err)
		}
		if got := len(adj.Devices); (pt == sdk.HookPreCreate) != (got == 1) {
			t.Errorf("%s: %d devices", pt, got)
		}
	}
}
