//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

// TestRequireLimits_Fixtures runs tests/*.yaml natively through sdk.Handle and
// against the compiled .wasm through wasmlet's plugin host.
func TestRequireLimits_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }
