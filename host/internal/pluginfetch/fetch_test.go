package pluginfetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

func abiParse(doc string, m *abi.Manifest) error {
	if err := yaml.UnmarshalStrict([]byte(doc), m); err != nil {
		return err
	}
	return m.Validate()
}

// TestFetcher_Resolve resolves a tag, pulls, verifies and keeps the
// artifact by digest, and returns the effective manifest: the artifact's
// kinds and version, the node's name and settings.
func TestFetcher_Resolve(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	image := reg.host + "/policies/policy:v1"
	d := push(t, image, moduleV1, "1.0.0", "  memoryPages: 32\n")
	dir, cacheDir := t.TempDir(), t.TempDir()
	path, ref := writeRef(t, dir, image, "order: 7\nfailurePolicy: Ignore\nconfig: {k: v}\npermissions:\n  memoryPages: 64\n")
	v := &fakeVerifier{}
	f, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), Verifier: v})

	if got := f.Stamps(map[string]abi.Manifest{path: ref}); got[path] != "" {
		t.Fatalf("Stamps before any resolution = %q, want none", got[path])
	}
	res, err := f.Resolve(ctx, path, ref)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if res.Digest != d.String() || res.Stamp != d.String() || !res.Verified || res.Image != image {
		t.Fatalf("Resolved = %+v, want digest %s, verified", res, d)
	}
	if m.Name != "policy" || m.Version != "1.0.0" || m.Order != 7 || m.FailurePolicy != abi.FailurePolicyIgnore || m.Config["k"] != "v" ||
		!m.HasKind(abi.KindAdmission) || m.Permissions.MemoryPages != 32 || m.Image != "" {
		t.Fatalf("effective manifest = %+v", m)
	}
	want, _ := os.ReadFile(moduleV1)
	if got, err := os.ReadFile(res.WasmPath); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("module at %s: %v (equal: %v)", res.WasmPath, err, bytes.Equal(got, want))
	}
	if !strings.HasPrefix(res.WasmPath, filepath.Join(cacheDir, "sha256", d.Hex)) {
		t.Fatalf("module at %s, want under %s/sha256/%s", res.WasmPath, cacheDir, d.Hex)
	}
	if len(v.asked) != 1 || v.asked[0] != d.String() {
		t.Fatalf("verifier asked about %v, want [%s]", v.asked, d)
	}
	if got := f.Stamps(map[string]abi.Manifest{path: ref}); got[path] != d.String() {
		t.Fatalf("Stamps after the resolution = %q, want %s", got[path], d)
	}
	// A second resolution is the cache's: the verifier is not asked again.
	if _, err := f.Resolve(ctx, path, ref); err != nil || len(v.asked) != 1 {
		t.Fatalf("second Resolve: %v, verifier asked %d times (want 1)", err, len(v.asked))
	}
}

// TestFetcher_registryDown: a restart with the registry down loads the
// digest the tag last resolved to from the cache; a re-resolution fails,
// is reported (Status, metric) and changes nothing.
func TestFetcher_registryDown(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	image := reg.host + "/policies/policy:v1"
	d := push(t, image, moduleV1, "1.0.0", "")
	dir, cacheDir := t.TempDir(), t.TempDir()
	path, ref := writeRef(t, dir, image, "")
	f, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{})})
	if _, err := f.Resolve(ctx, path, ref); err != nil {
		t.Fatal(err)
	}
	reg.close()

	// The agent restarts.
	changed := 0
	f2, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{}), OnChange: func() { changed++ }})
	if got := f2.Stamps(map[string]abi.Manifest{path: ref}); got[path] != d.String() {
		t.Fatalf("Stamps after a restart = %q, want the remembered %s", got[path], d)
	}
	res, err := f2.Resolve(ctx, path, ref)
	if err != nil || res.Digest != d.String() {
		t.Fatalf("Resolve with the registry down = %+v, %v; want %s from the cache", res, err, d)
	}
	f2.ResolveAll(ctx)
	st := f2.Status(path)
	if st.Error == "" || !strings.Contains(st.Error, image) || !strings.Contains(st.Error, `plugin "policy"`) || fetchErrors(f2, ReasonResolve) != 1 {
		t.Fatalf("after a failed re-resolution: status %+v, resolve errors %v; want the error naming plugin and image, counted", st, fetchErrors(f2, ReasonResolve))
	}
	if got := f2.Stamps(map[string]abi.Manifest{path: ref}); got[path] != d.String() || changed != 0 {
		t.Fatalf("after a failed re-resolution: stamp %q (want %s), OnChange called %d times (want 0)", got[path], d, changed)
	}
}

// TestFetcher_digestReference: a digest reference is pulled once and never
// asks the registry again.
func TestFetcher_digestReference(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	d := push(t, reg.host+"/policies/policy:v1", moduleV1, "1.0.0", "")
	image := reg.host + "/policies/policy@" + d.String()
	path, ref := writeRef(t, t.TempDir(), image, "")
	f, _ := newFetcher(t, Config{Dir: t.TempDir(), Client: newClient(t, pluginoci.Limits{})})
	f.Stamps(map[string]abi.Manifest{path: ref})
	if res, err := f.Resolve(ctx, path, ref); err != nil || res.Digest != d.String() {
		t.Fatalf("Resolve = %+v, %v", res, err)
	}
	reg.close()
	f.ResolveAll(ctx)
	if st := f.Status(path); st.Error != "" || st.Digest != d.String() {
		t.Fatalf("a digest reference with the registry down: status %+v, want no error", st)
	}
}

// TestFetcher_refused: artifacts the agent must not load are refused with
// the plugin, the reference and the reason, counted by reason, and nothing
// is kept.
func TestFetcher_refused(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
		io.WriteString(w, "<html>not a registry</html>")
	}))
	defer garbage.Close()
	gu, _ := url.Parse(garbage.URL)
	notPlugin := reg.host + "/images/busybox:1"
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := pluginoci.ParseReference(notPlugin)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, image, perms, grant string
		limits                    pluginoci.Limits
		verifier                  Verifier
		reason                    string
		want                      []string
	}{
		// The first resolution of a tag reads its manifest: one that is
		// not a manifest fails the resolution.
		{name: "garbage", image: gu.Host + "/x/policy:v1", reason: ReasonResolve, want: []string{"read manifest", "not a wasmlet plugin artifact"}},
		{name: "oversize", image: reg.host + "/p/oversize:v1", limits: pluginoci.Limits{Module: 16}, reason: ReasonPull, want: []string{"larger than allowed"}},
		{name: "not a plugin", image: notPlugin, reason: ReasonResolve, want: []string{"not a wasmlet plugin artifact"}},
		{name: "host beyond the grant", image: reg.host + "/p/hosts:v1", perms: "  allowedHosts: [api.example.com, evil.example.net]\n",
			grant: "permissions:\n  allowedHosts: [\"*.example.com\"]\n", reason: ReasonGrant, want: []string{"permissions.allowedHosts", "evil.example.net"}},
		{name: "memory beyond the grant", image: reg.host + "/p/mem:v1", perms: "  memoryPages: 4096\n",
			reason: ReasonGrant, want: []string{"permissions.memoryPages", "4096"}},
		{name: "timeout beyond the grant", image: reg.host + "/p/timeout:v1", perms: "  timeout: 5s\n",
			grant: "permissions:\n  timeout: 200ms\n", reason: ReasonGrant, want: []string{"permissions.timeout", "5s"}},
		{name: "monitor a hook", image: reg.host + "/p/mode:v1", grant: "mode: monitor\n", reason: ReasonGrant, want: []string{"mode"}},
		{name: "verification refused", image: reg.host + "/p/unsigned:v1", verifier: &fakeVerifier{refuse: errors.New("no signature by cosign.pub")},
			reason: ReasonVerify, want: []string{"no signature by cosign.pub"}},
		{name: "signatures required, no verifier", image: reg.host + "/p/required:v1", grant: "verification:\n  keys: [cosign.pub]\n",
			reason: ReasonVerify, want: []string{"no signature verifier"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.image, reg.host+"/p/") {
				wasm := moduleV1
				push(t, tc.image, wasm, "1.0.0", tc.perms)
			}
			if tc.name == "monitor a hook" {
				// An artifact declaring a hook cannot be monitored.
				pushKinds(t, tc.image, "[admission, hook]")
			}
			cacheDir := t.TempDir()
			path, ref := writeRef(t, t.TempDir(), tc.image, tc.grant)
			f, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, tc.limits), Verifier: tc.verifier})
			_, err := f.Resolve(ctx, path, ref)
			if err == nil {
				t.Fatal("Resolve succeeded")
			}
			for _, w := range append([]string{`plugin "policy"`, tc.image}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if n := fetchErrors(f, tc.reason); n != 1 {
				t.Errorf("fetch errors{reason=%s} = %v, want 1", tc.reason, n)
			}
			if got := f.Stamps(map[string]abi.Manifest{path: ref}); got[path] != "" {
				t.Errorf("stamp %q after a refusal, want none", got[path])
			}
			if ents, _ := os.ReadDir(filepath.Join(cacheDir, "sha256")); len(ents) != 0 {
				t.Errorf("cache holds %d entries after a refusal, want none", len(ents))
			}
		})
	}
}

// pushKinds pushes moduleV1 at ref with a manifest declaring kinds.
func pushKinds(t *testing.T, ref, kinds string) {
	t.Helper()
	b, _ := os.ReadFile(moduleV1)
	p := &pluginoci.Plugin{Module: pluginoci.File{Name: "policy.wasm", Data: b}}
	sum := sha256Hex(b)
	p.Manifest = pluginoci.File{Name: "policy.plugin.yaml", Data: []byte("name: policy\nversion: 1.0.0\nabi: v1\nkinds: " + kinds + "\nsha256: " + sum + "\n")}
	if _, err := newClient(t, pluginoci.Limits{}).Push(context.Background(), ref, p, pluginoci.Meta{}); err != nil {
		t.Fatal(err)
	}
}

// TestFetcher_crashMidWrite: what an interrupted write left — a temporary
// directory, an artifact directory without its marker — is never loaded;
// with the registry back, the artifact is pulled again.
func TestFetcher_crashMidWrite(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	image := reg.host + "/policies/policy:v1"
	d := push(t, image, moduleV1, "1.0.0", "")
	path, ref := writeRef(t, t.TempDir(), image, "")
	cacheDir := t.TempDir()
	f, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{})})
	if _, err := f.Resolve(ctx, path, ref); err != nil {
		t.Fatal(err)
	}
	// Make it look as if the agent died while writing: no marker, and a
	// leftover temporary directory.
	art := filepath.Join(cacheDir, "sha256", d.Hex)
	markers, _ := filepath.Glob(filepath.Join(art, markerPrefix+"*"))
	if len(markers) != 1 {
		t.Fatalf("markers %v, want one", markers)
	}
	os.Remove(markers[0])
	tmp := filepath.Join(cacheDir, "sha256", tmpPrefix+d.Hex+"-123")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tmp, moduleFile), []byte("\x00asm"), 0o644)

	down := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("registry down") })}
	cDown, err := pluginoci.New(pluginoci.Config{Transport: down.Transport})
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := newFetcher(t, Config{Dir: cacheDir, Client: cDown})
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary directory %s still there after New: %v", tmp, err)
	}
	if got := f2.Stamps(map[string]abi.Manifest{path: ref}); got[path] != "" {
		t.Fatalf("stamp %q for an artifact without its marker, want none", got[path])
	}
	if _, err := f2.Resolve(ctx, path, ref); err == nil || !strings.Contains(err.Error(), "registry down") {
		t.Fatalf("Resolve of an unmarked artifact with the registry down = %v, want the registry's error", err)
	}
	f3, _ := newFetcher(t, Config{Dir: cacheDir, Client: newClient(t, pluginoci.Limits{})})
	if res, err := f3.Resolve(ctx, path, ref); err != nil || res.Digest != d.String() {
		t.Fatalf("Resolve with the registry back = %+v, %v", res, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFetcher_Manager: through the plugin host's Manager, a moved tag is
// pulled and verified before the Manager loads it; a refused verification
// keeps the old version serving; the accepted one replaces it, and a
// plugin of the name serves at every moment in between.
func TestFetcher_Manager(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	image := reg.host + "/policies/policy:v1"
	d1 := push(t, image, moduleV1, "1.0.0", "")
	dir := t.TempDir()
	writeRef(t, dir, image, "")
	v := &fakeVerifier{}
	var m *pluginhost.Manager
	var rescans atomic.Int32
	f, _ := newFetcher(t, Config{Dir: t.TempDir(), Client: newClient(t, pluginoci.Limits{}), Verifier: v,
		OnChange: func() { rescans.Add(1); m.Rescan() }})
	m, err := pluginhost.NewManager(pluginhost.Config{Dir: dir, Resolver: f, CacheDir: t.TempDir(), Rescan: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })

	serving := func() pluginhost.Info { return servingInfo(m, "policy") }
	eventually(t, "v1 serving", func() bool { return serving().Digest == d1.String() })

	// Watch that a plugin named policy serves at every moment from here.
	var gaps atomic.Int32
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			if m.Get("policy") == nil {
				gaps.Add(1)
			}
		}
	}()

	d2 := push(t, image, moduleV2, "2.0.0", "")
	v.set(errors.New("signature refused"))
	f.ResolveAll(ctx)
	if in := serving(); in.Digest != d1.String() || in.Version != "1.0.0" || !strings.Contains(in.ResolveError, "signature refused") {
		t.Fatalf("after a refused verification: %+v, want v1 serving and the error shown", in)
	}
	if fetchErrors(f, ReasonVerify) != 1 || rescans.Load() != 0 {
		t.Fatalf("verify errors %v (want 1), rescans %d (want 0)", fetchErrors(f, ReasonVerify), rescans.Load())
	}

	v.set(nil)
	f.ResolveAll(ctx)
	eventually(t, "v2 serving", func() bool { in := serving(); return in.Digest == d2.String() && in.Version == "2.0.0" })
	stopWatch()
	<-watched
	if in := serving(); in.ResolveError != "" || in.ResolvedDigest != d2.String() || !in.Verified || in.Image != image {
		t.Fatalf("after the move: %+v", in)
	}
	if g := gaps.Load(); g != 0 {
		t.Fatalf("no plugin named policy served at %d moments during the move", g)
	}
}

// eventually polls cond until it holds or 20 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servingInfo is the Manager's Info of plugin name, zero when it has none.
func servingInfo(m *pluginhost.Manager, name string) pluginhost.Info {
	for _, in := range m.Plugins() {
		if in.Name == name {
			return in
		}
	}
	return pluginhost.Info{}
}
