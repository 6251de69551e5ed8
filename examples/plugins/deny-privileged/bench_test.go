//go:build !wasip1

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
)

// BenchmarkAdmit runs the policy natively with the SDK's decoder on
// testdata/pod4k.json, through sdk.Handle as the wasm export does. The same
// policy as .wasm through wasmlet's plugin host, beside a native
// encoding/json baseline, the C example and a Go guest on encoding/json, is
// BenchmarkAdmit in wasmlet's root module:
//
//	go test -run '^$' -bench Admit -benchtime 2000x .                         # here
//	go test -run '^$' -bench Admit -benchtime 2000x ./plugintest/shipped/     # from the repository root
func BenchmarkAdmit(b *testing.B) {
	pod, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "pod4k.json"))
	if err != nil {
		b.Fatal(err)
	}
	req := append(append([]byte(`{"pod":`), pod...), '}')
	b.Run("native-sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in := append([]byte(nil), req...) // Handle owns its input, as the wasm export does
			if out := sdk.Handle(sdk.KindAdmission, in); string(out) != `{"allowed":true}` {
				b.Fatalf("response %s", out)
			}
		}
	})
}
