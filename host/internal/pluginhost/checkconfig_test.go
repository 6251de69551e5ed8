package pluginhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

// TestLoad_CheckConfig covers the wasmlet_check_config export at Load: a
// config the module accepts loads, a refused one fails naming the plugin
// and carrying the module's message (at most abi.CheckConfigMessageMax
// bytes of it), an out-of-bounds message is a bad result, and a module
// without the export is never asked; an Extism module's export answers
// with its output.
func TestLoad_CheckConfig(t *testing.T) {
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name     string
		wasm     string
		config   map[string]string
		sentinel error
		want     string // the whole error, when it is one
	}{
		{"accepted", "testdata/wat/checkconfig.wasm", map[string]string{"allowed": "a"}, nil, ""},
		{"refused", "testdata/wat/checkconfig.wasm", map[string]string{"refuse": "allowed is not set"}, ErrConfigRefused,
			`plugin "checkconfig": config refused by the plugin: allowed is not set`},
		{"refused, long message", "testdata/wat/checkconfig.wasm", map[string]string{"refuse": long}, ErrConfigRefused,
			`plugin "checkconfig": config refused by the plugin: ` + long[:abi.CheckConfigMessageMax]},
		{"refused, empty message", "testdata/wat/checkconfig.wasm", map[string]string{"refuse": ""}, ErrConfigRefused,
			`plugin "checkconfig": config refused by the plugin: (no message)`},
		{"message out of bounds", "testdata/wat/checkconfig.wasm", map[string]string{"oob": "1"}, ErrBadResult, ""},
		{"no export: never asked", "testdata/wat/ok.wasm", map[string]string{"refuse": "never read"}, nil, ""},
		{"extism accepted", "testdata/wat/extismcheck.wasm", map[string]string{"allowed": "a"}, nil, ""},
		{"extism refused", "testdata/wat/extismcheck.wasm", map[string]string{"refuse": "allowed is not set"}, ErrConfigRefused,
			`plugin "extismcheck": config refused by the plugin: allowed is not set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load(context.Background(), LoadConfig{Path: tt.wasm, PluginConfig: tt.config})
			if tt.sentinel == nil {
				if err != nil {
					t.Fatalf("Load: %v, want it loaded", err)
				}
				defer p.Close(context.Background())
				if resp, err := p.Admit(context.Background(), admitReq(`{}`)); err != nil || !resp.Allowed {
					t.Fatalf("Admit after the load = %+v, %v; want allowed", resp, err)
				}
				return
			}
			if err == nil {
				p.Close(context.Background())
				t.Fatalf("Load succeeded, want %v", tt.sentinel)
			}
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), `plugin "`+strings.TrimSuffix(filepath.Base(tt.wasm), ".wasm")+`"`) {
				t.Fatalf("Load: %v, want %v naming the plugin", err, tt.sentinel)
			}
			if tt.want != "" && err.Error() != tt.want {
				t.Fatalf("Load: %q, want %q", err, tt.want)
			}
		})
	}
}

// writeCheckConfig writes checkconfig.wasm into dir as plugin cc with the
// manifest's config set to config (YAML flow map) and returns the manifest.
func writeCheckConfig(t *testing.T, dir, version, config string) string {
	t.Helper()
	return writePlugin(t, dir, "cc", "testdata/wat/checkconfig.wasm", version, "config: "+config+"\n")
}

// TestManager_ConfigRefusedReplacement: a replacement whose config the
// plugin refuses is not loaded; the previous version keeps serving, the
// refusal is the file's error, and a config accepted later replaces it.
func TestManager_ConfigRefusedReplacement(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := newManager(t, Config{Dir: dir, CacheDir: testCacheDir(t)})
	path := writeCheckConfig(t, dir, "1", "{allowed: a}")
	m.Scan(ctx)
	first := m.Get("cc")
	if first == nil {
		t.Fatalf("cc did not load: %+v", m.Plugins())
	}
	bumpMtime(t, writeCheckConfig(t, dir, "2", "{refuse: allowed is not set}"))
	m.Scan(ctx)
	in, _ := info(m, path)
	if m.Get("cc") != first || in.State != StateLoaded || in.Version != "1" ||
		!strings.Contains(in.Error, `plugin "cc": config refused by the plugin: allowed is not set`) {
		t.Fatalf("after a refused replacement: %+v, want version 1 serving and the refusal as the error", in)
	}
	if resp, err := first.Admit(ctx, admitReq(`{}`)); err != nil || !resp.Allowed {
		t.Fatalf("the serving version after the refusal: %+v, %v", resp, err)
	}
	bumpMtime(t, writeCheckConfig(t, dir, "3", "{allowed: b}"))
	m.Scan(ctx)
	in, _ = info(m, path)
	if in.State != StateLoaded || in.Version != "3" || in.Error != "" {
		t.Fatalf("after an accepted config: %+v, want version 3 serving, no error", in)
	}
}

// bumpMtime moves path's modification time forward, so a rewrite within
// the file system's time granularity still changes its stamp.
func bumpMtime(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	next := fi.ModTime().Add(2e9)
	if err := os.Chtimes(path, next, next); err != nil {
		t.Fatal(err)
	}
}

// writeRefManifest writes a reference manifest of plugin cc naming image
// with config (YAML flow map) and returns its path.
func writeRefManifest(t *testing.T, dir, image, config string) string {
	t.Helper()
	path := filepath.Join(dir, "cc.plugin.yaml")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("name: cc\nimage: "+image+"\nconfig: "+config+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	bumpMtime(t, path)
	return path
}

// TestManager_LastGoodAfterRestart: the last good version of a reference
// manifest is the last one that loaded. A refused config never becomes it;
// an agent restarted with the refused manifest on disk serves the last good
// version with the refusal as the file's error, and a rescan neither tries
// it again nor drops it; an accepted config becomes the new last good.
func TestManager_LastGoodAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const image = "registry.example/policies/cc:v1"
	res := &fakeResolver{dir: dir, current: map[string]string{image: "testdata/wat/checkconfig.wasm"}}
	cfg := Config{Dir: dir, Resolver: res, CacheDir: testCacheDir(t)}
	m := newManager(t, cfg)
	path := writeRefManifest(t, dir, image, "{allowed: a}")
	m.Scan(ctx)
	if in, _ := info(m, path); in.State != StateLoaded || in.Error != "" {
		t.Fatalf("first load: %+v", in)
	}
	good := res.lastGood(path)
	if good.Config["allowed"] != "a" {
		t.Fatalf("last good after the first load: %+v, want the loaded reference manifest", good)
	}

	// Refused while serving: the old version serves, the last good stays.
	writeRefManifest(t, dir, image, "{refuse: allowed is not set}")
	m.Scan(ctx)
	if in, _ := info(m, path); in.State != StateLoaded || !strings.Contains(in.Error, "config refused by the plugin: allowed is not set") {
		t.Fatalf("after a refused config: %+v, want loaded with the refusal", in)
	}
	if got := res.lastGood(path); got.Config["allowed"] != "a" || got.Config["refuse"] != "" {
		t.Fatalf("last good after a refused config = %+v, want the first one still", got)
	}

	// The agent restarts with the refused manifest on disk.
	m.Close(ctx)
	m2 := newManager(t, cfg)
	m2.Scan(ctx)
	in, _ := info(m2, path)
	if in.State != StateLoaded || in.Digest == "" || !strings.Contains(in.Error, `plugin "cc": config refused by the plugin: allowed is not set`) {
		t.Fatalf("after a restart: %+v, want the last good version serving and the refusal kept", in)
	}
	p := m2.Get("cc")
	if p == nil || p.Manifest().Config["allowed"] != "a" {
		t.Fatalf("serving after a restart: %v, want the last good version's config", p)
	}
	if resp, err := p.Admit(ctx, admitReq(`{"x":"!"}`)); err != nil || resp.Allowed {
		t.Fatalf("the last good version's admission = %+v, %v; want its denial", resp, err)
	}
	before := res.resolutions()
	m2.Scan(ctx)
	m2.Scan(ctx)
	in, _ = info(m2, path)
	if res.resolutions() != before || m2.Get("cc") != p || in.State != StateLoaded || !strings.Contains(in.Error, "config refused") {
		t.Fatalf("rescans: %d resolutions (want %d), %+v; want nothing retried, the fallback serving and the error kept",
			res.resolutions(), before, in)
	}

	// An accepted config loads and becomes the last good.
	writeRefManifest(t, dir, image, "{allowed: b}")
	m2.Scan(ctx)
	in, _ = info(m2, path)
	if in.State != StateLoaded || in.Error != "" || m2.Get("cc").Manifest().Config["allowed"] != "b" {
		t.Fatalf("after an accepted config: %+v, want it serving without error", in)
	}
	if got := res.lastGood(path); got.Config["allowed"] != "b" {
		t.Fatalf("last good after an accepted config = %+v, want it", got)
	}
}
