package pluginhost

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// TestPlugin_Extism loads a module written against Extism's kernel (bare:
// detected by its imports) and checks the kinds, the plugin-error path, the
// deadline and that the next call works.
func TestPlugin_Extism(t *testing.T) {
	for _, mode := range []DeadlineMode{DeadlineMeter, DeadlineCloseOnDone} {
		t.Run(string(mode), func(t *testing.T) { testExtism(t, mode) })
	}
}

func testExtism(t *testing.T, mode DeadlineMode) {
	ctx := context.Background()
	// Calls that must finish get a deadline no loaded machine reaches; the
	// spin gets its own plugin with a deadline short enough to wait out,
	// long enough that the call after it (on a fresh instance) finishes
	// within it on a busy machine.
	p := load(t, "testdata/wat/extism.wasm", Config{Timeout: time.Minute, Deadline: mode})
	if m := p.Manifest(); m.ABI != abi.Extism || len(m.Kinds) != 3 || p.DeadlineMode() != mode {
		t.Fatalf("manifest = %+v, deadline %s; want abi extism with 3 kinds, deadline %s", m, p.DeadlineMode(), mode)
	}
	r, err := p.Admit(ctx, admitReq(`{"metadata":{"name":"x!"}}`))
	if err != nil || r.Allowed || r.Reason != "Bang" {
		t.Fatalf("Admit = %+v, %v; want denied Bang", r, err)
	}
	if _, err := p.Hook(ctx, &abi.HookRequest{Point: abi.HookPreStop}); !errors.Is(err, ErrPluginFailed) || !strings.Contains(err.Error(), "hook failed on purpose") {
		t.Fatalf("Hook = %v, want ErrPluginFailed with the plugin's message", err)
	}
	if st := p.Stats(); st.Calls != 2 || st.Errors != 1 || st.Timeouts != 0 {
		t.Fatalf("stats = %+v", st)
	}
	spinner := load(t, "testdata/wat/extism.wasm", Config{Timeout: 5 * time.Second, Deadline: mode})
	start := time.Now()
	if _, err := spinner.Source(ctx, &abi.SourceRequest{Seq: 1}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Source = %v, want ErrTimeout", err)
	}
	// A margin no loaded machine reaches: the claim is that the spin is
	// stopped, not how fast (a spin never stopped would run for ever).
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("spinning source stopped after %s; its deadline is %s", d, spinner.Timeout())
	}
	if r, err := spinner.Admit(ctx, admitReq(`{}`)); err != nil || !r.Allowed {
		t.Fatalf("Admit after the spin = %+v, %v; want allowed", r, err)
	}
	if st := spinner.Stats(); st.Calls != 2 || st.Errors != 1 || st.Timeouts != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
