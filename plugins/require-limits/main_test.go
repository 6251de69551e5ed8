//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

// TestRequireLimits_Fixtures runs tests/*.yaml natively through sdk.Handle;
// wasmlet's root module runs them against the compiled .wasm through the
// real plugin host (plugintest/shipped).
func TestRequireLimits_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }
