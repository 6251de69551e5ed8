package plugintest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/internal/metertest"
)

// BenchmarkGuestCost splits what one admission of testdata/pod4k.json costs
// a Go guest, each step a module of its own called through the real host
// (default deadline mode, cpu-ns/op of the calling thread):
//
//   - empty: the raw-ABI export answering a constant (host call path and
//     the Go runtime's export entry);
//
//   - copy: the same with a fresh input buffer per call (the SDK's alloc);
//
//   - basic: the SDK decoding the basic fields only (sdk.Reads(0));
//
//   - all: the SDK decoding every field (the "everything" plugin, no Reads).
//
//     go test -run '^$' -bench GuestCost -benchtime 2000x ./plugintest/
func BenchmarkGuestCost(b *testing.B) {
	pod, err := os.ReadFile(filepath.Join("..", "testdata", "pod4k.json"))
	if err != nil {
		b.Fatal(err)
	}
	req, err := json.Marshal(abi.AdmitRequest{Pod: pod})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, g := range []struct{ name, dir string }{
		{"empty", "testdata/cost-empty"},
		{"copy", "testdata/cost-copy"},
		{"basic", "testdata/cost-basic"},
		{"all", "testdata/everything"},
	} {
		wasm, err := BuildGo(g.dir)
		if err != nil {
			b.Fatal(err)
		}
		p, err := TryLoad(plugin.LoadConfig{Path: wasm, Config: plugin.Config{PoolSize: 1}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(g.name, func(b *testing.B) {
			b.ReportAllocs()
			metertest.Loop(b, func() error {
				out, err := p.Call(ctx, abi.KindAdmission, req)
				if err == nil && string(out) != `{"allowed":true}` {
					b.Fatalf("%s answered %s", g.name, out)
				}
				return err
			})
		})
		p.Close(ctx)
	}
}
