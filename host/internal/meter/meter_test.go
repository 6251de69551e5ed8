package meter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// spinModule instantiates testdata/spin.wasm, metered, in a compiled runtime
// with the tick of cfg.
func spinModule(t *testing.T, cfg Config) api.Module {
	t.Helper()
	ctx := context.Background()
	orig, err := os.ReadFile("testdata/spin.wasm")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := cfg.Rewrite(orig, "")
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { r.Close(ctx) })
	if err := cfg.Instantiate(ctx, r); err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

// TestCall_Arm stops an endless loop that never calls the host, by deadline
// and by a cancelled context, and lets a finite loop finish.
func TestCall_Arm(t *testing.T) {
	tests := []struct {
		name     string
		timeout  time.Duration // 0: no deadline
		cancelIn time.Duration // 0: never cancelled
		export   string
		stopped  bool
	}{
		{"deadline", 50 * time.Millisecond, 0, "spin", true},
		{"cancel", 0, 50 * time.Millisecond, "spin", true},
		{"deadline and cancel", time.Hour, 50 * time.Millisecond, "spin", true},
		{"finite loop", time.Hour, 0, "count", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := spinModule(t, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelIn > 0 {
				time.AfterFunc(tt.cancelIn, cancel)
			}
			var c Call
			start := Now()
			deadline := time.Duration(0)
			if tt.timeout > 0 {
				deadline = start + tt.timeout
			}
			c.Arm(ctx, deadline)
			var params []uint64
			if tt.export == "count" {
				params = []uint64{10_000_000}
			}
			res, err := mod.ExportedFunction(tt.export).Call(WithCall(ctx, &c), params...)
			took := Now() - start
			if tt.stopped {
				if !errors.Is(err, ErrStopped) || !c.Stopped() {
					t.Fatalf("err = %v, Stopped %v; want ErrStopped", err, c.Stopped())
				}
				// The claim is that the spin stops (a spin that did not
				// would never return); how fast is a figure, not a check.
				t.Logf("stopped after %s", took)
				return
			}
			if err != nil || c.Stopped() || res[0] != 10_000_000 {
				t.Fatalf("count = %v, %v (Stopped %v)", res, err, c.Stopped())
			}
		})
	}
}

// TestConfig_Tick checks that a tick asks Config.Call and does nothing
// without a Call.
func TestConfig_Tick(t *testing.T) {
	var c Call
	c.Arm(nil, Now()-1) // already past
	asked := 0
	tick := Config{Call: func(context.Context) *Call { asked++; return &c }}.Tick()
	func() {
		defer func() {
			if r := recover(); r != ErrStopped {
				t.Errorf("recovered %v, want ErrStopped", r)
			}
		}()
		tick(context.Background(), nil, nil)
	}()
	if asked != 1 || !c.Stopped() {
		t.Errorf("asked %d, Stopped %v", asked, c.Stopped())
	}
	c.Reset()
	if c.Stopped() {
		t.Error("Stopped after Reset")
	}
	Config{}.Tick()(context.Background(), nil, nil) // no Call in the context: no panic
}

// TestConfig_Rewrite checks that the rewritten module is kept in CacheDir
// and read back from there.
func TestConfig_Rewrite(t *testing.T) {
	orig, err := os.ReadFile("testdata/spin.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{CacheDir: t.TempDir()}
	out, err := cfg.Rewrite(orig, "abc")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.CacheDir, "wasmlet-meter-"+Version+"-abc.wasm")
	cached, err := os.ReadFile(path)
	if err != nil || string(cached) != string(out) {
		t.Fatalf("cache file: %v (same bytes: %v)", err, string(cached) == string(out))
	}
	if err := os.WriteFile(path, []byte("from the cache"), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, _ := cfg.Rewrite(orig, "abc"); string(again) != "from the cache" {
		t.Errorf("second Rewrite did not read the cache")
	}
	if _, err := cfg.Rewrite([]byte("not wasm"), ""); err == nil {
		t.Error("Rewrite of a non-module succeeded")
	}
}
