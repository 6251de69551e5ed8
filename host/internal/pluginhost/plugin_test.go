package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

func admitReq(pod string) *abi.AdmitRequest {
	return &abi.AdmitRequest{Pod: json.RawMessage(pod)}
}

func TestLoad_Errors(t *testing.T) {
	dir := t.TempDir()
	badSHA := writePlugin(t, dir, "badsha", "testdata/wat/ok.wasm", "1", "")
	os.WriteFile(filepath.Join(dir, "badsha.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	noAdmit := filepath.Join(dir, "nokind.plugin.yaml")
	writePlugin(t, dir, "nokind", "testdata/wat/noexport.wasm", "1", "")
	badYAML := filepath.Join(dir, "bad.plugin.yaml")
	os.WriteFile(badYAML, []byte("name: Bad Name\nabi: v1\nkinds: [admission]\nsha256: x\n"), 0o644)
	v1ButNoMarker := writePlugin(t, dir, "v2", "testdata/wat/abiv2.wasm", "1", "")
	tests := []struct {
		name string
		path string
		want error
		msg  string // a substring the error must contain
	}{
		{"missing export (bare)", "testdata/wat/noexport.wasm", ErrMissingExport, "noexport.wasm exports none of"},
		{"missing export (manifest)", noAdmit, ErrMissingExport, "declares kind admission"},
		{"wrong ABI version", "testdata/wat/abiv2.wasm", ErrABIVersion, "wasmlet_abi_v2"},
		{"wrong ABI version (manifest)", v1ButNoMarker, ErrABIVersion, "wasmlet_abi_v2"},
		{"sha256 mismatch", badSHA, ErrSHA256, "badsha.wasm has sha256"},
		{"compile error", "testdata/bad.wasm", ErrCompile, "bad.wasm"},
		{"bad manifest", badYAML, ErrManifest, "bad.plugin.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load(context.Background(), LoadConfig{Path: tt.path})
			if err == nil {
				p.Close(context.Background())
				t.Fatalf("Load(%s) succeeded, want %v", tt.path, tt.want)
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Load(%s) = %v, want %v containing %q", tt.path, err, tt.want, tt.msg)
			}
		})
	}
}

func TestLoad_BareModule(t *testing.T) {
	p := load(t, "testdata/wat/ok.wasm", Config{})
	m := p.Manifest()
	if m.Name != "ok" || m.ABI != abi.V1 || m.FailurePolicy != abi.FailurePolicyFail || len(m.Kinds) != 3 {
		t.Fatalf("derived manifest = %+v", m)
	}
	if len(p.SHA256()) != 64 || m.SHA256 != p.SHA256() {
		t.Fatalf("sha256 %q / manifest %q", p.SHA256(), m.SHA256)
	}
	if p.DeadlineMode() != DeadlineMeter {
		t.Fatalf("deadline mode %s, want meter", p.DeadlineMode())
	}
}

func TestPlugin_Kinds(t *testing.T) {
	ctx := context.Background()
	p := load(t, "testdata/wat/ok.wasm", Config{})
	r, err := p.Admit(ctx, admitReq(`{"metadata":{"name":"a!"}}`))
	if err != nil || r.Allowed || r.Reason != "Bang" {
		t.Fatalf("Admit = %+v, %v; want denied Bang", r, err)
	}
	if r, err = p.Admit(ctx, admitReq(`{}`)); err != nil || !r.Allowed {
		t.Fatalf("Admit = %+v, %v; want allowed", r, err)
	}
	s, err := p.Source(ctx, &abi.SourceRequest{Seq: 1})
	if err != nil || len(s.Updates) != 1 || s.Updates[0].Op != abi.OpSet {
		t.Fatalf("Source = %+v, %v", s, err)
	}
	h, err := p.Hook(ctx, &abi.HookRequest{Point: abi.HookPreCreate, Pod: json.RawMessage(`{}`)})
	if err != nil || h.Adjustment == nil || len(h.Adjustment.Env) != 1 || h.Adjustment.Env[0].Name != "A" {
		t.Fatalf("Hook = %+v, %v", h, err)
	}
	st := p.Stats()
	if st.Calls != 4 || st.Errors != 0 || st.Quantile(0.99) == 0 {
		t.Fatalf("stats = %+v", st)
	}
	loop := load(t, "testdata/wat/loop.wasm", Config{})
	if _, err := loop.Hook(ctx, &abi.HookRequest{}); !errors.Is(err, ErrNoKind) {
		t.Fatalf("Hook on an admission-only plugin = %v, want ErrNoKind", err)
	}
}

// TestPlugin_Faults runs each misbehaving guest twice: both calls must fail
// with the expected error (the host survives), each on a fresh instance.
func TestPlugin_Faults(t *testing.T) {
	tests := []struct {
		name, path string
		want       error
		msg        string
	}{
		{"trap", "testdata/wat/trap.wasm", ErrTrap, "unreachable"},
		{"result pointer 0", "testdata/wat/ptr0.wasm", ErrBadResult, "pointer 0"},
		{"result out of bounds", "testdata/wat/oob.wasm", ErrBadResult, "out of bounds"},
		{"invalid JSON", "testdata/wat/badjson.wasm", ErrBadResult, "invalid JSON"},
		{"memory bomb (memory.grow)", "testdata/wat/membomb.wasm", ErrMemoryLimit, "memory cap of 64 pages"},
		{"memory bomb (C malloc)", "testdata/c/cbomb.wasm", ErrMemoryLimit, "memory cap of 64 pages"},
		{"infinite loop", "testdata/wat/loop.wasm", ErrTimeout, "stopped after 50ms"},
	}
	for _, mode := range []DeadlineMode{DeadlineMeter, DeadlineCloseOnDone} {
		for _, tt := range tests {
			t.Run(string(mode)+"/"+tt.name, func(t *testing.T) {
				timeout := 2 * time.Second
				if tt.want == ErrTimeout {
					timeout = 50 * time.Millisecond
				}
				p := load(t, tt.path, Config{Deadline: mode, MemoryPages: 64, Timeout: timeout})
				for i := 0; i < 2; i++ {
					_, err := p.Admit(context.Background(), admitReq(`{}`))
					if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), `plugin "`+p.Name()+`"`) {
						t.Fatalf("call %d: Admit = %v, want %v containing %q and the plugin name", i, err, tt.want, tt.msg)
					}
				}
				// The instance made at load served the first call and was
				// discarded; the second call ran on a fresh one.
				if st := p.Stats(); st.Instantiations != 2 || st.Errors != 2 {
					t.Fatalf("stats = %+v, want 2 instantiations and 2 errors", st)
				}
			})
		}
	}
	t.Run("C trap", func(t *testing.T) {
		p := load(t, "testdata/c/cbomb.wasm", Config{})
		if _, err := p.Source(context.Background(), &abi.SourceRequest{}); !errors.Is(err, ErrTrap) {
			t.Fatalf("Source = %v, want ErrTrap", err)
		}
	})
}

// TestPlugin_GoGuest covers a standard-Go guest: its panics, memory bomb and
// spin are contained and the next call on a fresh instance works; the host
// imports answer.
func TestPlugin_GoGuest(t *testing.T) {
	ctx := context.Background()
	// The faults other than the spin get a deadline a loaded machine cannot
	// reach (a memory bomb takes a while to fill 64 MiB); the spin gets its
	// own instance with a 1 s deadline.
	cfg := Config{Timeout: time.Minute, MemoryPages: 1024, CacheDir: testCacheDir(t),
		NodeInfo: func(context.Context) (abi.NodeInfo, error) { return abi.NodeInfo{Name: "node-1"}, nil }}
	p, err := Load(ctx, LoadConfig{Path: goGuest(t), Config: cfg, PluginConfig: map[string]string{"reason": "FromConfig"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	spinCfg := cfg
	spinCfg.Timeout = time.Second
	spinner, err := Load(ctx, LoadConfig{Path: goGuest(t), Config: spinCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer spinner.Close(ctx)
	faults := []struct {
		p    *Plugin
		pod  string
		want error
		msg  string
	}{
		{p, `"panic"`, ErrTrap, "goguest: asked to panic"},
		{p, `"bomb"`, ErrMemoryLimit, "memory cap of 1024 pages"},
		{spinner, `"spin"`, ErrTimeout, "stopped after 1s"},
	}
	for _, f := range faults {
		_, err := f.p.Admit(ctx, admitReq(f.pod))
		if !errors.Is(err, f.want) || !strings.Contains(err.Error(), f.msg) {
			t.Fatalf("Admit(%s) = %v, want %v containing %q", f.pod, err, f.want, f.msg)
		}
		if r, err := f.p.Admit(ctx, admitReq(`"fine"`)); err != nil || !r.Allowed {
			t.Fatalf("after %s: Admit = %+v, %v; want allowed", f.pod, r, err)
		}
	}
	answers := []struct{ pod, reason string }{
		{`"config"`, "FromConfig"},
		{`"kv"`, "1"},
		{`"kv"`, "2"},
		{`"node"`, "node-1"},
	}
	for _, a := range answers {
		r, err := p.Admit(ctx, admitReq(a.pod))
		if err != nil || r.Allowed || r.Reason != a.reason {
			t.Fatalf("Admit(%s) = %+v, %v; want denied with reason %q", a.pod, r, err, a.reason)
		}
	}
}

func TestPlugin_Close(t *testing.T) {
	p, err := Load(context.Background(), LoadConfig{Path: "testdata/wat/ok.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	p.Close(context.Background())
	if _, err := p.Admit(context.Background(), admitReq(`{}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Admit after Close = %v, want ErrClosed", err)
	}
}

// TestPlugin_Concurrent checks that parallel calls share the bounded pool.
func TestPlugin_Concurrent(t *testing.T) {
	p := load(t, "testdata/wat/ok.wasm", Config{PoolSize: 2})
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		go func() {
			var err error
			for j := 0; j < 50 && err == nil; j++ {
				_, err = p.Admit(context.Background(), admitReq(`{}`))
			}
			errs <- err
		}()
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Instantiations > 2 || st.Calls != 800 {
		t.Fatalf("stats = %+v, want ≤ 2 instances for 800 calls", st)
	}
}

// TestPlugin_Recycle checks that an instance is replaced after RecycleAfter
// calls.
func TestPlugin_Recycle(t *testing.T) {
	p := load(t, "testdata/wat/ok.wasm", Config{RecycleAfter: 3, PoolSize: 1})
	for i := 0; i < 7; i++ {
		if _, err := p.Admit(context.Background(), admitReq(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	// Calls 1-3 on the instance made at load, 4-6 on a second, 7 on a third.
	if st := p.Stats(); st.Instantiations != 3 {
		t.Fatalf("instantiations = %d, want 3", st.Instantiations)
	}
}

// TestPlugin_PoolWait checks that a call waiting for a busy instance gives up
// with its context. The busy call holds the only instance from inside its
// node_info import until the waiting call has given up, then spins until its
// own deadline stops it.
func TestPlugin_PoolWait(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p := load(t, "testdata/wat/held.wasm", Config{PoolSize: 1, Timeout: 300 * time.Millisecond,
		NodeInfo: func(ctx context.Context) (abi.NodeInfo, error) {
			once.Do(func() { close(held) })
			select { // a second instance (a pool not bounded) waits no longer than its call
			case <-release:
			case <-ctx.Done():
			}
			return abi.NodeInfo{}, nil
		}})
	spun := make(chan error)
	go func() { _, err := p.Admit(context.Background(), admitReq(`{}`)); spun <- err }()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Admit(ctx, admitReq(`{}`))
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for an instance") {
		t.Fatalf("Admit = %v, want a context deadline while waiting for an instance", err)
	}
	if err := <-spun; !errors.Is(err, ErrTimeout) {
		t.Fatalf("spinning call = %v, want ErrTimeout", err)
	}
}

// TestPlugin_ExportsImports checks the module's functions as Function
// values: exports sorted by name, imports in file order without the
// deadline instrumentation's own.
func TestPlugin_ExportsImports(t *testing.T) {
	p := load(t, "testdata/wat/held.wasm", Config{Deadline: DeadlineMeter})
	exports := p.Exports()
	want := []Function{
		{Name: abi.ExportVersionV1, Params: []string{}, Results: []string{}},
		{Name: abi.ExportAdmit, Params: []string{"i32", "i32"}, Results: []string{"i64"}},
		{Name: abi.ExportAlloc, Params: []string{"i32"}, Results: []string{"i32"}},
	}
	if !reflect.DeepEqual(exports, want) {
		t.Errorf("Exports = %+v, want %+v", exports, want)
	}
	imports := p.Imports()
	wantImports := []Function{{Module: abi.ImportModule, Name: abi.ImportNodeInfo, Params: []string{"i32", "i32"}, Results: []string{"i32"}}}
	if !reflect.DeepEqual(imports, wantImports) {
		t.Errorf("Imports = %+v, want %+v", imports, wantImports)
	}
	x := load(t, "testdata/wat/extism.wasm", Config{})
	if x.Exports() != nil || x.Imports() != nil {
		t.Errorf("an Extism plugin's Exports, Imports = %v, %v; want nil", x.Exports(), x.Imports())
	}
}
