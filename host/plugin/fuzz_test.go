package plugin

import (
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wasmlet/wasmlet/abi"
)

// FuzzDecodeResult feeds arbitrary guest results to the decoder of each
// response type: it must return an error or a value, never panic.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`{"allowed":true}`, `{"updates":[{"op":"SET","pods":[{}]}]}`,
		`{"adjustment":{"env":[{"name":"A","value":"1"}]}}`, `not json {`, ``, `null`, `{"allowed":"yes"}`, "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{&abi.AdmitResponse{}, &abi.SourceResponse{}, &abi.HookResponse{}} {
			_ = decodeResult(b, v)
		}
	})
}

// FuzzMeter checks the deadline instrumentation on arbitrary input: it never
// panics, and whenever wazero accepts the original module and meter accepts
// it too, wazero accepts the metered module.
func FuzzMeter(f *testing.F) {
	for _, p := range []string{"testdata/wat/ok.wasm", "testdata/wat/loop.wasm", "testdata/wat/work.wasm", "testdata/wat/shift.wasm", "testdata/wat/extism.wasm", "testdata/c/cbomb.wasm"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := meter(b)
		if err != nil {
			return
		}
		orig, err := r.CompileModule(ctx, b)
		if err != nil {
			return
		}
		orig.Close(ctx)
		m, err := r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("metered module does not compile: %v", err)
		}
		m.Close(ctx)
	})
}
