package meter

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
)

// FuzzRewrite checks the instrumentation on arbitrary input: it never panics,
// and whenever wazero accepts the original module and Rewrite accepts it
// too, wazero accepts the metered module. Seeds: this package's fixtures and
// pluginhost's (plugins in WAT and C).
func FuzzRewrite(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.wasm")
	more, _ := filepath.Glob("../pluginhost/testdata/*/*.wasm")
	for _, p := range append(seeds, more...) {
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
		out, err := Rewrite(b)
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
