package pluginhost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmlet/wasmlet/abi"
)

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func info(m *Manager, path string) (Info, bool) {
	for _, in := range m.Plugins() {
		if in.Path == path {
			return in, true
		}
	}
	return Info{}, false
}

// TestManager_Scan walks a directory through add, replace, a broken
// replacement (refused, the old version keeps serving), a failing file that
// does not disturb the others, and removal.
func TestManager_Scan(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	m := newManager(t, Config{Dir: dir, Registerer: reg, CacheDir: filepath.Join(t.TempDir(), "cache")})

	a := writePlugin(t, dir, "a", "testdata/wat/ok.wasm", "1.0.0", "order: 2\n")
	b := writePlugin(t, dir, "b", "testdata/wat/ok.wasm", "1.0.0", "order: 1\n")
	broken := writePlugin(t, dir, "broken", "testdata/bad.wasm", "1.0.0", "")
	m.Scan(ctx)
	adm := m.Admitters()
	if len(adm) != 2 || adm[0].Name() != "b" || adm[1].Name() != "a" {
		t.Fatalf("Admitters = %v, want [b a] (order 1 before 2)", names(adm))
	}
	if in, _ := info(m, broken); in.State != StateFailed || !strings.Contains(in.Error, "compile error") {
		t.Fatalf("broken.wasm info = %+v", in)
	}
	if _, err := adm[0].Admit(ctx, admitReq(`{}`)); err != nil {
		t.Fatal(err)
	}

	// Replace a with version 2 (another module: loop.wasm has admission too).
	writePlugin(t, dir, "a", "testdata/wat/work.wasm", "2.0.0", "")
	m.Scan(ctx)
	if in, _ := info(m, a); in.State != StateLoaded || in.Version != "2.0.0" || in.Error != "" {
		t.Fatalf("after replace: %+v", in)
	}

	// A broken replacement: the manifest's sha256 no longer matches.
	os.WriteFile(filepath.Join(dir, "a.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	m.Scan(ctx)
	in, _ := info(m, a)
	if in.State != StateLoaded || in.Version != "2.0.0" || !strings.Contains(in.Error, "sha256 mismatch") {
		t.Fatalf("after broken replace: %+v, want 2.0.0 serving with a sha256 error", in)
	}
	if r, err := m.Get("a").Admit(ctx, admitReq(`{}`)); err != nil || !r.Allowed {
		t.Fatalf("old version after refused replace: %+v, %v", r, err)
	}

	if n := series(t, reg, "wasmlet_plugin_calls_total"); n != 2 {
		t.Fatalf("wasmlet_plugin_calls_total series = %d, want 2", n)
	}

	os.Remove(b)
	os.Remove(filepath.Join(dir, "b.wasm"))
	m.Scan(ctx)
	if _, ok := info(m, b); ok || m.Get("b") != nil || len(m.Admitters()) != 1 {
		t.Fatalf("b still present after removal: %+v", m.Plugins())
	}
}

// TestManager_Run checks that Run picks up changes by itself (fsnotify).
func TestManager_Run(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, Config{Dir: dir, Rescan: time.Hour})
	changes := make(chan struct{}, 10)
	m.OnChange(func() { changes <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	writePlugin(t, dir, "w", "testdata/wat/ok.wasm", "1", "")
	eventually(t, 5*time.Second, "plugin w to load", func() bool { return m.Get("w") != nil })
	writePlugin(t, dir, "w", "testdata/wat/work.wasm", "2", "")
	eventually(t, 5*time.Second, "plugin w version 2", func() bool {
		p := m.Get("w")
		return p != nil && p.Manifest().Version == "2"
	})
	os.Remove(filepath.Join(dir, "w.plugin.yaml"))
	os.Remove(filepath.Join(dir, "w.wasm"))
	eventually(t, 5*time.Second, "plugin w to unload", func() bool { return m.Get("w") == nil })
	if len(changes) < 3 {
		t.Fatalf("OnChange ran %d times, want ≥ 3", len(changes))
	}
}

func TestManager_Refusals(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, Config{Dir: dir})
	writePlugin(t, dir, "x", "testdata/wat/ok.wasm", "1", "")
	// Another manifest with the same plugin name.
	mf, _ := os.ReadFile(filepath.Join(dir, "x.plugin.yaml"))
	os.WriteFile(filepath.Join(dir, "y.plugin.yaml"), append(mf, "wasm: x.wasm\n"...), 0o644)
	os.WriteFile(filepath.Join(dir, "stray.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o644)
	m.Scan(context.Background())
	if in, _ := info(m, filepath.Join(dir, "stray.wasm")); in.State != StateFailed || !strings.Contains(in.Error, "stray.plugin.yaml") {
		t.Fatalf("stray.wasm: %+v, want failed for want of stray.plugin.yaml", in)
	}
	failed := 0
	for _, in := range m.Plugins() {
		if in.State == StateFailed && strings.Contains(in.Error, "name already used") {
			failed++
		}
	}
	if failed != 1 || len(m.OfKind(abi.KindAdmission)) != 1 {
		t.Fatalf("plugins = %+v, want one loaded and one refused for its name", m.Plugins())
	}
}

// TestManager_Scan_parallel loads a directory several files at a time: every
// good file serves, a bad one fails naming its file without stopping the
// others, and of two files naming one plugin the first by path serves, as in
// a scan that loads one file after another. The files share one module,
// read from a warm file compilation cache, whose loads must not meet: wazero
// would hand one of them a module not yet ready to instantiate (under -race,
// a data race within a few rounds).
func TestManager_Scan_parallel(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	var good []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		good = append(good, writePlugin(t, dir, n, "testdata/wat/ok.wasm", "1", ""))
	}
	broken := writePlugin(t, dir, "broken", "testdata/bad.wasm", "1", "")
	mf, _ := os.ReadFile(filepath.Join(dir, "d.plugin.yaml"))
	twin := filepath.Join(dir, "d2.plugin.yaml") // after d.plugin.yaml by path
	os.WriteFile(twin, append(mf, "wasm: d.wasm\n"...), 0o644)
	for round := range 20 {
		m, err := NewManager(Config{Dir: dir, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		m.loaders = 4
		m.Scan(context.Background())
		for _, path := range good {
			if in, _ := info(m, path); in.State != StateLoaded || in.Error != "" {
				t.Errorf("round %d: %s: %+v, want loaded", round, path, in)
			}
		}
		if in, _ := info(m, broken); in.State != StateFailed || !strings.Contains(in.Error, "compile error") || !strings.Contains(in.Error, "broken.wasm") {
			t.Errorf("round %d: broken: %+v, want a compile error naming broken.wasm", round, in)
		}
		if in, _ := info(m, twin); in.State != StateFailed || !strings.Contains(in.Error, "name already used by "+filepath.Join(dir, "d.plugin.yaml")) {
			t.Errorf("round %d: d2: %+v, want refused, d.plugin.yaml serving the name", round, in)
		}
		if p := m.Get("d"); p == nil || p.Path() != filepath.Join(dir, "d.plugin.yaml") {
			t.Errorf("round %d: plugin d served by %v, want d.plugin.yaml", round, p)
		}
		if n := len(m.Admitters()); n != len(good) {
			t.Errorf("round %d: %d admission plugins, want %d", round, n, len(good))
		}
		m.Close(context.Background())
		if t.Failed() {
			return
		}
	}
}

func names(ps []*Plugin) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return out
}

// series counts the metrics of one family in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestManager_Scan_sameVersionAndDeletedModule: a same-version replacement
// keeps the plugin's figures; deleting only the module of a loaded plugin
// is shown on its file while the loaded version keeps serving.
func TestManager_Scan_sameVersionAndDeletedModule(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := newManager(t, Config{Dir: dir})
	mf := writePlugin(t, dir, "x", "testdata/wat/ok.wasm", "1.0.0", "")
	m.Scan(ctx)
	for range 3 {
		if _, err := m.Get("x").Admit(ctx, admitReq(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	writePlugin(t, dir, "x", "testdata/wat/ok.wasm", "1.0.0", "order: 5\n")
	m.Scan(ctx)
	if in, _ := info(m, mf); in.Order != 5 || in.Stats.Calls != 3 {
		t.Fatalf("after a same-version replacement: order %d, calls %d; want 5 and the 3 calls kept", in.Order, in.Stats.Calls)
	}
	writePlugin(t, dir, "x", "testdata/wat/work.wasm", "2.0.0", "")
	m.Scan(ctx)
	if in, _ := info(m, mf); in.Version != "2.0.0" || in.Stats.Calls != 0 {
		t.Fatalf("after a new version: version %s, calls %d; want 2.0.0 with its own figures", in.Version, in.Stats.Calls)
	}
	if err := os.Remove(filepath.Join(dir, "x.wasm")); err != nil {
		t.Fatal(err)
	}
	m.Scan(ctx)
	in, _ := info(m, mf)
	if in.State != StateLoaded || in.Version != "2.0.0" || !strings.Contains(in.Error, "x.wasm") {
		t.Fatalf("after deleting x.wasm: %+v, want 2.0.0 serving and an error naming x.wasm", in)
	}
}

// TestManager_LowerDir checks the precedence of Dir over LowerDir: a
// plugin named in both serves from Dir whichever came first, the LowerDir
// file is refused meanwhile and serves again once Dir's goes; a LowerDir
// that does not exist yet is an empty one.
func TestManager_LowerDir(t *testing.T) {
	ctx := context.Background()
	dir, lower := t.TempDir(), filepath.Join(t.TempDir(), "api")
	m := newManager(t, Config{Dir: dir, LowerDir: lower})
	m.Scan(ctx)
	if len(m.Plugins()) != 0 {
		t.Fatalf("plugins with a missing lower dir: %+v", m.Plugins())
	}
	if err := os.Mkdir(lower, 0o755); err != nil {
		t.Fatal(err)
	}
	lp := writePlugin(t, lower, "p", "testdata/wat/ok.wasm", "1-api", "")
	writePlugin(t, lower, "q", "testdata/wat/ok.wasm", "1-api", "")
	m.Scan(ctx)
	if p := m.Get("p"); p == nil || p.Manifest().Version != "1-api" {
		t.Fatalf("p from the lower dir not serving: %+v", m.Plugins())
	}

	// The operator's directory names p too: it wins, though the lower
	// dir's was serving first.
	dp := writePlugin(t, dir, "p", "testdata/wat/ok.wasm", "2-dir", "")
	m.Scan(ctx)
	if p := m.Get("p"); p == nil || p.Manifest().Version != "2-dir" {
		t.Fatalf("p after the directory's: %+v, want 2-dir serving", m.Plugins())
	}
	if in, _ := info(m, lp); in.State != StateFailed || !strings.Contains(in.Error, "already used by "+dp) {
		t.Fatalf("lower dir's p: %+v, want refused naming %s", in, dp)
	}
	if q := m.Get("q"); q == nil {
		t.Fatal("q from the lower dir unloaded")
	}

	// A new version in the lower dir is still refused.
	writePlugin(t, lower, "p", "testdata/wat/work.wasm", "3-api", "")
	m.Scan(ctx)
	if p := m.Get("p"); p == nil || p.Manifest().Version != "2-dir" {
		t.Fatalf("p after a new lower version: %+v, want 2-dir serving", m.Plugins())
	}

	// The directory's p goes: the lower dir's serves again.
	os.Remove(dp)
	os.Remove(filepath.Join(dir, "p.wasm"))
	m.Scan(ctx)
	if p := m.Get("p"); p == nil || p.Manifest().Version != "3-api" {
		t.Fatalf("p after the directory's went: %+v, want 3-api serving", m.Plugins())
	}

	// Both present at a first scan: the directory's serves.
	m2 := newManager(t, Config{Dir: dir, LowerDir: lower})
	writePlugin(t, dir, "q", "testdata/wat/ok.wasm", "4-dir", "")
	m2.Scan(ctx)
	if q := m2.Get("q"); q == nil || q.Manifest().Version != "4-dir" {
		t.Fatalf("q at a first scan: %+v, want 4-dir serving", m2.Plugins())
	}
}
