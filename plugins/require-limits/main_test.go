//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/plugins/internal/plugintest"
)

// TestRequireLimits_Admit runs tests/*.yaml natively through sdk.Handle.
func TestRequireLimits_Admit(t *testing.T) { plugintest.Native(t, ".") }

// TestRequireLimits_Wasm runs tests/*.yaml against the compiled .wasm through
// wasmlet's plugin host.
func TestRequireLimits_Wasm(t *testing.T) { plugintest.Wasm(t, ".") }
