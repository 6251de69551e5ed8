//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmlet/wasmlet/plugins/internal/plugintest"
)

// TestNoPrivileged_Admit runs tests/*.yaml natively through sdk.Handle.
func TestNoPrivileged_Admit(t *testing.T) { plugintest.Native(t, ".") }

// TestNoPrivileged_Wasm runs tests/*.yaml against the compiled .wasm through
// wasmlet's plugin host.
func TestNoPrivileged_Wasm(t *testing.T) { plugintest.Wasm(t, ".") }
