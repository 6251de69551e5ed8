package pluginfetch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// TestFetcher_lastGood: a reference manifest changed to an image the node
// refuses (verification fails) keeps its last good version across an agent
// restart — Resolve returns the old version with the old settings and the
// failure is still reported — and a reference manifest removed forgets it.
func TestFetcher_lastGood(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	v1img, v2img := reg.host+"/policies/policy:v1", reg.host+"/policies/policy:v2"
	d1 := push(t, v1img, moduleV1, "1.0.0", "")
	push(t, v2img, moduleV1, "2.0.0", "")
	dir, cacheDir := t.TempDir(), t.TempDir()
	path, ref1 := writeRef(t, dir, v1img, "order: 3\n")
	v := &fakeVerifier{}
	f, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), Verifier: v})
	f.Stamps(map[string]abi.Manifest{path: ref1})
	res1, err := f.Resolve(ctx, path, ref1)
	if err != nil {
		t.Fatal(err)
	}
	f.Loaded(path, res1)
	// The manifest now names v2, which the node refuses.
	v.set(errors.New("no signature"))
	_, ref2 := writeRef(t, dir, v2img, "order: 9\n")

	// The agent restarts.
	f2, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), Verifier: v})
	f2.Stamps(map[string]abi.Manifest{path: ref2})
	res, err := f2.Resolve(ctx, path, ref2)
	if err != nil || res.Digest != d1.String() || res.Image != v1img || res.Manifest.Order != 3 {
		t.Fatalf("Resolve after a restart with v2 refused = %+v, %v; want v1 (%s) with its settings", res, err, d1)
	}
	if st := f2.Status(path); !strings.Contains(st.Error, "no signature") || !strings.Contains(st.Error, v2img) {
		t.Errorf("status = %+v, want v2's refusal reported", st)
	}
	if fetchErrors(f2, ReasonVerify) != 1 {
		t.Errorf("verify errors counted: %v, want 1", fetchErrors(f2, ReasonVerify))
	}

	// The reference manifest goes: its last good version is forgotten, a
	// new one of the same path starts afresh.
	f2.Stamps(map[string]abi.Manifest{})
	f3, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), Verifier: v})
	f3.Stamps(map[string]abi.Manifest{path: ref2})
	if res, err := f3.Resolve(ctx, path, ref2); err == nil {
		t.Fatalf("Resolve of a refused image after its manifest was removed = %+v, want the refusal", res)
	}
}

// TestFetcher_Loaded: only a version that loaded becomes the last good one.
// A reference manifest that resolves but whose plugin did not load (its
// config refused) is not remembered: after a restart, Fallback returns the
// version that loaded, with its reference manifest, from the last-good
// file; and a reference manifest that never loaded has no fallback.
func TestFetcher_Loaded(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	img := reg.host + "/policies/policy:v1"
	d1 := push(t, img, moduleV1, "1.0.0", "")
	dir, cacheDir := t.TempDir(), t.TempDir()
	cfg := Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), Verifier: &fakeVerifier{}}
	path, good := writeRef(t, dir, img, "config: {allowed: a}\n")

	f, _ := newFetcher(t, cfg)
	f.Stamps(map[string]abi.Manifest{path: good})
	res, err := f.Resolve(ctx, path, good)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref.Config["allowed"] != "a" {
		t.Fatalf("Resolve's Ref = %+v, want the reference manifest resolved", res.Ref)
	}
	// Resolved, never loaded: nothing to fall back to after a restart.
	_, refused := writeRef(t, dir, img, "config: {other: b}\n")
	f2, _ := newFetcher(t, cfg)
	f2.Stamps(map[string]abi.Manifest{path: refused})
	if got, ok := f2.Fallback(ctx, path); ok {
		t.Fatalf("Fallback of a reference that never loaded = %+v, want none", got)
	}

	// Loaded: it is the last good version; the refused manifest resolves
	// too, but is not loaded and does not replace it.
	f2.Stamps(map[string]abi.Manifest{path: good})
	res, err = f2.Resolve(ctx, path, good)
	if err != nil {
		t.Fatal(err)
	}
	f2.Loaded(path, res)
	f2.Stamps(map[string]abi.Manifest{path: refused})
	if _, err := f2.Resolve(ctx, path, refused); err != nil {
		t.Fatal(err)
	}
	if _, ok := f2.Fallback(ctx, path); !ok {
		t.Fatal("Fallback while the refused manifest is watched: none, want the loaded version")
	}

	// The agent restarts with the refused manifest on disk.
	f3, _ := newFetcher(t, cfg)
	f3.Stamps(map[string]abi.Manifest{path: refused})
	got, ok := f3.Fallback(ctx, path)
	if !ok || got.Digest != d1.String() || got.Ref.Config["allowed"] != "a" || got.Manifest.Config["allowed"] != "a" || got.Manifest.Config["other"] != "" {
		t.Fatalf("Fallback after a restart = %+v, %v; want %s with the loaded manifest's config", got, ok, d1)
	}
	// While the loaded manifest itself is the one watched, there is
	// nothing else to fall back to.
	f3.Stamps(map[string]abi.Manifest{path: good})
	if got, ok := f3.Fallback(ctx, path); ok {
		t.Fatalf("Fallback to the reference manifest that is current = %+v, want none", got)
	}
}

// TestFetcher_Manager_lastLoaded: through the plugin host's Manager, a
// reference manifest whose config the plugin refuses leaves the previous
// version serving; after a restart (a new Fetcher on the same cache, a new
// Manager) with that manifest on disk, the version that loaded before
// serves from the last-good file, with its config, and the refusal is the
// file's error.
func TestFetcher_Manager_lastLoaded(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	image := reg.host + "/policies/policy:v1"
	d := push(t, image, "../pluginhost/testdata/wat/checkconfig.wasm", "1.0.0", "")
	dir, cacheDir, compiled := t.TempDir(), t.TempDir(), t.TempDir()
	start := func() (*Fetcher, *pluginhost.Manager) {
		f, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), Verifier: &fakeVerifier{}})
		m, err := pluginhost.NewManager(pluginhost.Config{Dir: dir, Resolver: f, CacheDir: compiled, Rescan: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(ctx) })
		return f, m
	}
	serving := func(m *pluginhost.Manager) pluginhost.Info { return servingInfo(m, "policy") }
	const refusal = `plugin "policy": config refused by the plugin: allowed is not set`

	writeRef(t, dir, image, "config: {allowed: a}\n")
	_, m := start()
	m.Scan(ctx)
	if in := serving(m); in.State != pluginhost.StateLoaded || in.Digest != d.String() || in.Error != "" {
		t.Fatalf("first load: %+v", in)
	}
	writeRef(t, dir, image, "config: {refuse: allowed is not set}\n")
	m.Scan(ctx)
	if in := serving(m); in.State != pluginhost.StateLoaded || m.Get("policy").Manifest().Config["allowed"] != "a" || !strings.Contains(in.Error, refusal) {
		t.Fatalf("after a refused config: %+v, want the first config serving and the refusal", in)
	}
	b, err := os.ReadFile(filepath.Join(cacheDir, lastGoodFile))
	if err != nil || strings.Contains(string(b), "refuse") || !strings.Contains(string(b), d.String()) {
		t.Fatalf("%s = %s, %v; want the loaded version only", lastGoodFile, b, err)
	}

	// The agent restarts with the refused manifest on disk.
	m.Close(ctx)
	_, m2 := start()
	m2.Scan(ctx)
	in := serving(m2)
	p := m2.Get("policy")
	if in.State != pluginhost.StateLoaded || in.Digest != d.String() || !strings.Contains(in.Error, refusal) || p == nil || p.Manifest().Config["allowed"] != "a" {
		t.Fatalf("after a restart: %+v, want %s serving with the config that loaded and the refusal as the error", in, d)
	}
}
