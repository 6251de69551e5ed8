package meter

import (
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// TestRewrite checks that metering preserves behaviour: shift.wasm computes
// the same results before and after, and the metered one calls tick.
func TestRewrite(t *testing.T) {
	ctx := context.Background()
	orig, err := os.ReadFile("testdata/shift.wasm")
	if err != nil {
		t.Fatal(err)
	}
	metered, err := Rewrite(orig)
	if err != nil {
		t.Fatalf("meter: %v", err)
	}
	ticks := 0
	run := func(wasm []byte) map[string]uint32 {
		r := wazero.NewRuntime(ctx)
		defer r.Close(ctx)
		_, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
			WithFunc(func(x uint32) uint32 { return x + 1 }).Export("add1").Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) { ticks++ }), nil, nil).
			Export(ImportFunc).Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := r.Instantiate(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint32{}
		for name, arg := range map[string]uint64{"run": 7, "viaref": 7, "sum": 100000} {
			res, err := mod.ExportedFunction(name).Call(ctx, arg)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = api.DecodeU32(res[0])
		}
		return out
	}
	want := run(orig)
	if ticks != 0 {
		t.Fatal("the original module ticked")
	}
	got := run(metered)
	// run(7) = 5 + 14 + 8 + 21; viaref(7) = 14; sum = n(n-1) mod 2^32.
	if want["run"] != 48 || want["viaref"] != 14 || want["sum"] != uint32(uint64(100000*99999)%(1<<32)) {
		t.Fatalf("original results %v", want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: metered %d, original %d", k, got[k], v)
		}
	}
	// sum runs 100000 loop iterations and 100000 calls of a probed function.
	if ticks < 100000/Interval {
		t.Errorf("metered module ticked %d times, want ≥ %d", ticks, 100000/Interval)
	}
}

func TestRewrite_Refuses(t *testing.T) {
	ok, err := os.ReadFile("testdata/spin.wasm")
	if err != nil {
		t.Fatal(err)
	}
	twice, err := Rewrite(ok)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string][]byte{
		"not wasm":        []byte("hello"),
		"truncated":       ok[:len(ok)-3],
		"already metered": twice,
	}
	for name, b := range tests {
		if _, err := Rewrite(b); err == nil {
			t.Errorf("%s: meter succeeded", name)
		}
	}
}
