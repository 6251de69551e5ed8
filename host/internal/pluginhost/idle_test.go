package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// TestPlugin_IdleReap checks that an idle plugin gives back its instances
// and compiled code and that its next call reloads them and answers; a
// module file changed on disk meanwhile is refused, not run.
func TestPlugin_IdleReap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, mode := range []DeadlineMode{DeadlineMeter, DeadlineCloseOnDone} {
		t.Run(string(mode), func(t *testing.T) {
			path := writePlugin(t, dir, "ok-"+string(mode), "testdata/wat/ok.wasm", "1.0.0", "")
			p := load(t, path, Config{Deadline: mode, IdleTimeout: 50 * time.Millisecond, CacheDir: filepath.Join(dir, "cache")})
			if m := p.Memory(); !m.CodeLoaded || m.Idle != 1 || m.LinearBytes == 0 {
				t.Fatalf("after load: %+v, want the code loaded and the instance made at load idle", m)
			}
			idle := func() bool { m := p.Memory(); return !m.CodeLoaded && m.Idle == 0 }
			eventually(t, 30*time.Second, "the idle plugin to unload", idle)
			// The call waits for the reload and gets the plugin's own
			// verdict: a denial stays a denial (no fail-open while loading).
			if resp, err := p.Admit(ctx, admitReq(`{"bang":"!"}`)); err != nil || resp.Allowed || resp.Reason != "Bang" {
				t.Fatalf("call after unload = %+v, %v; want the plugin's denial", resp, err)
			}
			if _, err := p.Admit(ctx, admitReq(`{}`)); err != nil {
				t.Fatalf("second call after unload: %v", err)
			}
			if st := p.Stats(); st.Unloads != 1 || st.Reloads != 1 || st.Instantiations != 2 {
				t.Fatalf("stats = %+v, want 1 unload, 1 reload, 2 instantiations", st)
			}
			eventually(t, 30*time.Second, "the idle plugin to unload again", idle)
			wasm := filepath.Join(dir, "ok-"+string(mode)+".wasm")
			b, err := os.ReadFile("testdata/wat/trap.wasm")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(wasm, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Admit(ctx, admitReq(`{}`)); !errors.Is(err, ErrSHA256) {
				t.Fatalf("call after the module changed on disk = %v, want ErrSHA256", err)
			}
		})
	}
}

// TestPlugin_IdleKeep checks that a negative IdleTimeout keeps an idle
// plugin's code and instance.
func TestPlugin_IdleKeep(t *testing.T) {
	p := load(t, "testdata/wat/ok.wasm", Config{IdleTimeout: -1})
	if _, err := p.Call(context.Background(), abi.KindAdmission, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	p.reap() // what the reaper would do, were it running
	if m := p.Memory(); !m.CodeLoaded || m.Idle != 1 {
		t.Fatalf("after reap with IdleTimeout < 0: %+v, want the code and one instance kept", m)
	}
}

// TestPlugin_Reads checks the wasmlet_reads export: a module that reads the
// node and not the pods on it is sent the one and not the other; a module
// without the export is sent both.
func TestPlugin_Reads(t *testing.T) {
	ctx := context.Background()
	bang := json.RawMessage(`{"metadata":{"name":"!"}}`)
	plain := json.RawMessage(`{"metadata":{"name":"n"}}`)
	tests := []struct {
		path       string
		reads      abi.Reads
		node, pods json.RawMessage
		allowed    bool
	}{
		{"testdata/wat/reads.wasm", abi.ReadsNode, plain, bang, true},
		{"testdata/wat/reads.wasm", abi.ReadsNode, bang, plain, false},
		{"testdata/wat/ok.wasm", abi.ReadsAll, plain, bang, false},
		{"testdata/wat/ok.wasm", abi.ReadsAll, bang, plain, false},
	}
	for _, tt := range tests {
		p := load(t, tt.path, Config{})
		if got := p.Reads(); got != tt.reads {
			t.Fatalf("%s: Reads() = %b, want %b", tt.path, got, tt.reads)
		}
		req := &abi.AdmitRequest{Pod: plain, Node: tt.node, PodsOnNode: []json.RawMessage{plain, tt.pods}}
		resp, err := p.Admit(ctx, req)
		if err != nil || resp.Allowed != tt.allowed {
			t.Errorf("%s, node %s, pods on node ...%s: Admit = %+v, %v; want allowed %v", tt.path, tt.node, tt.pods, resp, err, tt.allowed)
		}
		if len(req.PodsOnNode) != 2 || req.Node == nil {
			t.Errorf("Admit changed the caller's request")
		}
	}
}

// TestPlugin_IdleReapExtism checks the same for an Extism plugin: idle, it
// gives back its instances and compiled plugin; the next call compiles it
// again and gets the plugin's own verdict.
func TestPlugin_IdleReapExtism(t *testing.T) {
	ctx := context.Background()
	p := load(t, "testdata/wat/extism.wasm", Config{Timeout: time.Minute, IdleTimeout: 50 * time.Millisecond, CacheDir: filepath.Join(t.TempDir(), "cache")})
	idle := func() bool { m := p.Memory(); return !m.CodeLoaded && m.Idle == 0 }
	eventually(t, 30*time.Second, "the idle Extism plugin to unload", idle)
	if r, err := p.Admit(ctx, admitReq(`{"metadata":{"name":"x!"}}`)); err != nil || r.Allowed || r.Reason != "Bang" {
		t.Fatalf("call after unload = %+v, %v; want the plugin's denial", r, err)
	}
	if m := p.Memory(); !m.CodeLoaded || m.Idle != 1 {
		t.Fatalf("after the call: %+v, want the code loaded and one idle instance", m)
	}
	if st := p.Stats(); st.Unloads != 1 || st.Reloads != 1 || st.Instantiations != 2 {
		t.Fatalf("stats = %+v, want 1 unload, 1 reload, 2 instantiations", st)
	}
	eventually(t, 30*time.Second, "the idle Extism plugin to unload again", idle)
	p.Close(ctx)
	if _, err := p.Admit(ctx, admitReq(`{}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close = %v, want ErrClosed", err)
	}
}
