//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

// TestValidator_Fixtures runs tests/*.yaml natively through sdk.Handle;
// wasmlet's root module runs them against the compiled .wasm through the
// real plugin host (plugintest/shipped).
func TestValidator_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }
