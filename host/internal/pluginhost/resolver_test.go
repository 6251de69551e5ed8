package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

// fakeResolver serves reference manifests from modules the test names:
// stamp is the version each image currently resolves to.
type fakeResolver struct {
	mu       sync.Mutex
	dir      string
	current  map[string]string // image → module file (its stamp)
	fail     error             // Resolve's answer while set
	resolves int
	watched  map[string]abi.Manifest
	good     map[string]Resolved // Loaded's, by path: what a last-good file keeps
}

func (f *fakeResolver) Stamps(refs map[string]abi.Manifest) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watched = refs
	out := map[string]string{}
	for path, ref := range refs {
		out[path] = f.current[ref.Image]
	}
	return out
}

func (f *fakeResolver) Resolve(_ context.Context, path string, ref abi.Manifest) (Resolved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolves++
	if f.fail != nil {
		return Resolved{}, fmt.Errorf("plugin %q: %s: %w", ref.Name, ref.Image, f.fail)
	}
	wasm, err := filepath.Abs(f.current[ref.Image])
	if err != nil {
		return Resolved{}, err
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		return Resolved{}, err
	}
	sum := sha256.Sum256(b)
	eff := ref
	eff.Image, eff.Verification = "", nil
	eff.Version, eff.ABI, eff.Kinds, eff.SHA256, eff.Wasm = filepath.Base(wasm), abi.V1, []abi.Kind{abi.KindAdmission}, hex.EncodeToString(sum[:]), ""
	if err := eff.Validate(); err != nil {
		return Resolved{}, err
	}
	return Resolved{Manifest: eff, WasmPath: wasm, Stamp: f.current[ref.Image], Image: ref.Image, Digest: "sha256:" + eff.SHA256, Verified: true, Ref: ref}, nil
}

func (f *fakeResolver) Loaded(path string, res Resolved) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.good == nil {
		f.good = map[string]Resolved{}
	}
	f.good[path] = res
}

func (f *fakeResolver) Fallback(_ context.Context, path string) (Resolved, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.good[path]
	if !ok || reflect.DeepEqual(g.Ref, f.watched[path]) {
		return Resolved{}, false
	}
	return g, true
}

// lastGood is the Ref of what Loaded last recorded for path.
func (f *fakeResolver) lastGood(path string) abi.Manifest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.good[path].Ref
}

// resolutions is how many times Resolve was called.
func (f *fakeResolver) resolutions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resolves
}

func (f *fakeResolver) Status(path string) ResolveStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := ResolveStatus{Image: f.watched[path].Image}
	if f.fail != nil {
		st.Error = f.fail.Error()
	}
	return st
}

func (f *fakeResolver) set(image, wasm string, fail error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.current[image], f.fail = wasm, fail
}

// TestManager_Resolver loads a reference manifest through the Resolver,
// reloads it when the reference moves (the old version serving until the
// new one is in), keeps it when a resolution fails, and reports the image,
// digest and last error.
func TestManager_Resolver(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const image = "registry.example/policies/ok:v1"
	res := &fakeResolver{dir: dir, current: map[string]string{image: "testdata/wat/ok.wasm"}}
	m := newManager(t, Config{Dir: dir, Resolver: res, CacheDir: filepath.Join(t.TempDir(), "cache")})
	ref := filepath.Join(dir, "ok.plugin.yaml")
	if err := os.WriteFile(ref, []byte("name: ok\nimage: "+image+"\norder: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Scan(ctx)
	in, _ := info(m, ref)
	if in.State != StateLoaded || in.Version != "ok.wasm" || in.Image != image || !in.Verified || !strings.HasPrefix(in.Digest, "sha256:") || in.Order != 4 {
		t.Fatalf("after the first scan: %+v, want ok.wasm loaded from %s, verified, order 4", in, image)
	}
	first := m.Get("ok")

	// Nothing moved: a scan loads nothing again.
	m.Scan(ctx)
	if res.resolves != 1 || m.Get("ok") != first {
		t.Fatalf("a scan with nothing moved resolved %d times in all (want 1) or replaced the plugin", res.resolves)
	}

	// A failed resolution of a moved reference keeps the old version.
	res.set(image, "testdata/wat/loop.wasm", errors.New("registry unreachable"))
	m.Scan(ctx)
	in, _ = info(m, ref)
	if m.Get("ok") != first || in.State != StateLoaded || !strings.Contains(in.Error, "registry unreachable") || !strings.Contains(in.ResolveError, "registry unreachable") {
		t.Fatalf("after a failed resolution: %+v, want the first version serving and the error reported", in)
	}
	if _, err := first.Admit(ctx, admitReq(`{}`)); err != nil {
		t.Fatalf("the serving version after a failed resolution: %v", err)
	}

	// The reference moved again and resolves: the new version replaces
	// the old. (A failed stamp is tried again when the stamp changes.)
	res.set(image, "testdata/wat/work.wasm", nil)
	m.Scan(ctx)
	in, _ = info(m, ref)
	if in.State != StateLoaded || in.Version != "work.wasm" || in.Error != "" || m.Get("ok") == first {
		t.Fatalf("after the reference moved: %+v, want work.wasm serving", in)
	}
}

// TestManager_NoResolver refuses a reference manifest when nothing resolves
// it, naming the manifest and the image.
func TestManager_NoResolver(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, Config{Dir: dir})
	ref := filepath.Join(dir, "ok.plugin.yaml")
	if err := os.WriteFile(ref, []byte("name: ok\nimage: registry.example/p/ok:v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Scan(context.Background())
	in, _ := info(m, ref)
	if in.State != StateFailed || !strings.Contains(in.Error, ref) || !strings.Contains(in.Error, "registry.example/p/ok:v1") {
		t.Fatalf("info = %+v, want failed naming the manifest and the image", in)
	}
}
