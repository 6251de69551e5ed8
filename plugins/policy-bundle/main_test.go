//go:build !wasip1

package main

import (
	"path/filepath"
	"testing"

	"github.com/wasmlet/wasmlet/sdk/sdktest"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// TestPolicyBundle_Fixtures runs tests/*.yaml natively through sdk.Handle;
// wasmlet's root module runs them against the compiled .wasm through the
// real plugin host (plugintest/shipped).
func TestPolicyBundle_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }

// TestPolicyBundle_Order checks that the bundle runs the policies in the
// order of their own plugins' manifests (plugins/<name>/plugin.yaml): the
// same pod is denied for the same reason by the bundle as by the four
// plugins in a chain.
func TestPolicyBundle_Order(t *testing.T) {
	prev := -1
	for _, p := range policies() {
		m, err := fixture.ReadManifest(filepath.Join("..", p.Name))
		if err != nil {
			t.Fatalf("policy %s: %v", p.Name, err)
		}
		if m.Name != p.Name {
			t.Errorf("policy %s: its plugin's manifest names %s", p.Name, m.Name)
		}
		if m.Order <= prev {
			t.Errorf("policy %s: its plugin's order %d is not after the previous policy's %d", p.Name, m.Order, prev)
		}
		prev = m.Order
	}
	if len(policies()) != 4 {
		t.Errorf("%d policies, want the four first-party ones", len(policies()))
	}
}
