package pluginoci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	corev1 "k8s.io/api/core/v1"
)

// module is the smallest WebAssembly module.
var module = []byte("\x00asm\x01\x00\x00\x00")

func testPlugin(wasm []byte) *Plugin {
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf("name: demo\nversion: 1.2.3\nabi: v1\nkinds: [admission]\nsha256: %s\n", hex.EncodeToString(sum[:]))
	return &Plugin{
		Module:   File{Name: "demo.wasm", Data: wasm},
		Manifest: File{Name: "demo.plugin.yaml", Data: []byte(manifest)},
		Tests: []File{
			{Name: "allow.yaml", Data: []byte("description: allowed\n")},
			{Name: "deny.yaml", Data: []byte("description: denied\n")},
		},
	}
}

// newRegistry starts go-containerregistry's in-memory registry on
// loopback and returns its host:port.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Host
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Keychain == nil {
		cfg.Keychain = authn.NewMultiKeychain() // anonymous, not this user's files
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClient_PushPull(t *testing.T) {
	ctx := context.Background()
	ref := newRegistry(t) + "/plugins/demo:1.2.3"
	c := newClient(t, Config{})
	p := testPlugin(module)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d, err := c.Push(ctx, ref, p, Meta{Created: created, Author: "policy team"})
	if err != nil {
		t.Fatal(err)
	}
	got, gd, err := c.Pull(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if gd != d {
		t.Errorf("pulled digest %s, pushed %s", gd, d)
	}
	if fmt.Sprint(got) != fmt.Sprint(p) {
		t.Errorf("pulled %+v, pushed %+v", got, p)
	}

	// The layout: the spec's manifest, config and first layer, wasmlet's
	// layers after it, each titled.
	r, _ := ParseReference(ref)
	desc, err := remote.Get(r)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.wasm.config.v0+json" {
		t.Errorf("manifest %s, config %s", m.MediaType, m.Config.MediaType)
	}
	wantTypes := []string{"application/wasm", ManifestMediaType, TestMediaType, TestMediaType}
	wantTitles := []string{"demo.wasm", "demo.plugin.yaml", "allow.yaml", "deny.yaml"}
	if len(m.Layers) != len(wantTypes) {
		t.Fatalf("%d layers, want %d", len(m.Layers), len(wantTypes))
	}
	var digests []string
	for i, l := range m.Layers {
		if string(l.MediaType) != wantTypes[i] || l.Annotations[AnnotationTitle] != wantTitles[i] {
			t.Errorf("layer %d: %s %q, want %s %q", i, l.MediaType, l.Annotations[AnnotationTitle], wantTypes[i], wantTitles[i])
		}
		digests = append(digests, l.Digest.String())
	}
	img, _ := desc.Image()
	raw, _ := img.RawConfigFile()
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"os": "wasip1", "architecture": "wasm", "author": "policy team", "created": "2026-01-02T03:04:05Z"}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("config %s = %v, want %v", k, cfg[k], v)
		}
	}
	if fmt.Sprint(cfg["layerDigests"]) != fmt.Sprint(digests) {
		t.Errorf("config layerDigests %v, want %v", cfg["layerDigests"], digests)
	}
}

// pushRaw pushes the plugin's artifact after edit changed its manifest,
// config or layers; extra blobs are pushed with it.
func pushRaw(t *testing.T, ref string, p *Plugin, edit func(m *v1.Manifest, cfg *WasmConfig), extra ...[]byte) {
	t.Helper()
	a, err := newArtifact(p, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	var cfg WasmConfig
	if err := json.Unmarshal(a.manifest, &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(a.config, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, b := range extra {
		l := static.NewLayer(b, "application/octet-stream")
		d, _ := l.Digest()
		a.layers[d] = l
	}
	edit(&m, &cfg)
	a.config, _ = json.Marshal(cfg)
	cd, _, _ := v1.SHA256(bytes.NewReader(a.config))
	m.Config.Digest, m.Config.Size = cd, int64(len(a.config))
	a.manifest, _ = json.Marshal(m)
	img, _ := a.image()
	r, _ := ParseReference(ref)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

func descriptorOf(b []byte, title string) v1.Descriptor {
	d, _, _ := v1.SHA256(bytes.NewReader(b))
	return v1.Descriptor{MediaType: "application/octet-stream", Size: int64(len(b)), Digest: d, Annotations: map[string]string{AnnotationTitle: title}}
}

func TestClient_Pull_badArtifacts(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	c := newClient(t, Config{Limits: Limits{Module: 1024}})
	big := append(append([]byte{}, module...), make([]byte, 2048)...)
	cases := []struct {
		name    string
		p       *Plugin
		edit    func(m *v1.Manifest, cfg *WasmConfig)
		extra   [][]byte
		wantErr error
		wantMsg string
	}{
		{name: "config-media-type", edit: func(m *v1.Manifest, _ *WasmConfig) {
			m.Config.MediaType = "application/vnd.oci.image.config.v1+json"
		}, wantErr: ErrNotPlugin, wantMsg: "config media type"},
		{name: "component", edit: func(_ *v1.Manifest, cfg *WasmConfig) { cfg.OS = "wasip2" }, wantErr: ErrNotPlugin, wantMsg: "wasip2"},
		{name: "layer-0-not-wasm", edit: func(m *v1.Manifest, _ *WasmConfig) {
			m.Layers[0].MediaType = "application/vnd.oci.image.layer.v1.tar+gzip"
		}, wantErr: ErrNotPlugin, wantMsg: "layer 0"},
		{name: "unknown-layer", edit: func(m *v1.Manifest, cfg *WasmConfig) {
			m.Layers[2].MediaType = "text/plain"
			cfg.LayerDigests = nil
		}, wantErr: ErrNotPlugin, wantMsg: `"text/plain"`},
		{name: "no-manifest-layer", edit: func(m *v1.Manifest, cfg *WasmConfig) {
			m.Layers = append(m.Layers[:1], m.Layers[2:]...)
			cfg.LayerDigests = nil
		}, wantErr: ErrNotPlugin, wantMsg: "no plugin manifest layer"},
		{name: "layer-digests", edit: func(_ *v1.Manifest, cfg *WasmConfig) {
			cfg.LayerDigests[0], cfg.LayerDigests[1] = cfg.LayerDigests[1], cfg.LayerDigests[0]
		}, wantErr: ErrNotPlugin, wantMsg: "layerDigests"},
		{name: "module-too-large", p: testPlugin(big), edit: func(*v1.Manifest, *WasmConfig) {}, wantErr: ErrTooLarge, wantMsg: "demo.wasm"},
		{name: "traversal", edit: func(m *v1.Manifest, _ *WasmConfig) {
			m.Layers[2].Annotations[AnnotationTitle] = "../../etc/evil.yaml"
		}, wantErr: ErrUnsafeName, wantMsg: "path separator"},
		{name: "dotdot", edit: func(m *v1.Manifest, _ *WasmConfig) {
			m.Layers[3].Annotations[AnnotationTitle] = ".."
		}, wantErr: ErrUnsafeName, wantMsg: ".."},
		{name: "no-title", edit: func(m *v1.Manifest, _ *WasmConfig) {
			delete(m.Layers[1].Annotations, AnnotationTitle)
		}, wantErr: ErrUnsafeName, wantMsg: "empty file name"},
		{name: "module-not-wasm", extra: [][]byte{[]byte("#!/bin/sh\n")}, edit: func(m *v1.Manifest, cfg *WasmConfig) {
			d := descriptorOf([]byte("#!/bin/sh\n"), "demo.wasm")
			m.Layers[0].Digest, m.Layers[0].Size = d.Digest, d.Size
			cfg.LayerDigests = nil
		}, wantErr: ErrNotPlugin, wantMsg: "not WebAssembly"},
		{name: "size-lies", edit: func(m *v1.Manifest, cfg *WasmConfig) {
			m.Layers[1].Size--
		}, wantErr: ErrNotPlugin, wantMsg: "descriptor says"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			if p == nil {
				p = testPlugin(module)
			}
			ref := host + "/bad/" + tc.name + ":v1"
			pushRaw(t, ref, p, tc.edit, tc.extra...)
			_, _, err := c.Pull(ctx, ref)
			if err == nil {
				t.Fatal("pull succeeded")
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) || !strings.Contains(err.Error(), ref) {
				t.Fatalf("error %q, want %v naming %s and %q", err, tc.wantErr, ref, tc.wantMsg)
			}
		})
	}
}

func TestClient_Pull_notAnArtifact(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/busybox:1"
	r, _ := ParseReference(ref)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	_, _, err = newClient(t, Config{}).Pull(ctx, ref)
	if !errors.Is(err, ErrNotPlugin) || !strings.Contains(err.Error(), ref) {
		t.Fatalf("error %v, want ErrNotPlugin naming %s", err, ref)
	}
}

func TestClient_Pull_garbage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		io.WriteString(w, "<html>not a registry</html>")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/x/y:1"
	_, _, err := newClient(t, Config{}).Pull(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), "pull "+ref) {
		t.Fatalf("error %v, want one naming %s", err, ref)
	}
	t.Log(err)
}

func TestClient_Push_refusesBadPlugin(t *testing.T) {
	host := newRegistry(t)
	p := testPlugin(module)
	p.Module.Data = append([]byte{}, module...)
	p.Module.Data[7] = 2 // sha256 no longer matches
	_, err := newClient(t, Config{}).Push(context.Background(), host+"/x:1", p, Meta{})
	if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("error %v, want ErrPlugin about sha256", err)
	}
}

func TestLoopbackOnlyHTTP(t *testing.T) {
	var reached []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		reached = append(reached, r.URL.String())
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	tr := loopbackOnlyHTTP{next}
	for _, u := range []string{"http://127.0.0.1:5000/v2/", "http://[::1]:5000/v2/", "http://localhost:5000/v2/", "https://10.0.0.1/v2/", "https://registry.example/v2/"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := tr.RoundTrip(req); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1:5000/v2/", "http://192.168.1.2/v2/", "http://registry.example/v2/"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrInsecure) {
			t.Errorf("%s: error %v, want ErrInsecure", u, err)
		}
	}
	if len(reached) != 5 {
		t.Errorf("reached %v", reached)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestParseReference(t *testing.T) {
	for ref, scheme := range map[string]string{
		"127.0.0.1:5000/p:1":   "http",
		"localhost:5000/p:1":   "http",
		"[::1]:5000/p:1":       "http",
		"registry.example/p:1": "https",
		"10.0.0.1:5000/p:1":    "http", // go-containerregistry's fallback, which the transport refuses
		"ghcr.io/org/policy@sha256:" + strings.Repeat("a", 64): "https",
	} {
		r, err := ParseReference(ref)
		if err != nil {
			t.Errorf("%s: %v", ref, err)
			continue
		}
		if got := r.Context().Scheme(); got != scheme {
			t.Errorf("%s: scheme %s, want %s", ref, got, scheme)
		}
	}
}

func TestPlugin_WriteDir(t *testing.T) {
	p := testPlugin(module)
	root := t.TempDir()
	fresh := filepath.Join(root, "fresh")
	if err := p.WriteDir(fresh); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(root, "plugins")
	os.MkdirAll(existing, 0o755)
	os.WriteFile(filepath.Join(existing, "other.plugin.yaml"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(existing, "demo.wasm"), []byte("old"), 0o644)
	if err := p.WriteDir(existing); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fresh, existing} {
		back, err := ReadPlugin(dir+"/demo.plugin.yaml", "")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back) != fmt.Sprint(p) {
			t.Errorf("%s: read back %+v", dir, back)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(existing, "other.plugin.yaml")); string(b) != "x" {
		t.Error("other file changed")
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 2 {
		t.Errorf("temporary directories left: %v", entries)
	}
}

func TestReadPlugin(t *testing.T) {
	dir := t.TempDir()
	p := testPlugin(module)
	if err := p.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPlugin(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(p) {
		t.Errorf("read %+v", got)
	}
	os.WriteFile(filepath.Join(dir, "second.plugin.yaml"), p.Manifest.Data, 0o644)
	if _, err := ReadPlugin(dir, ""); !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "2 plugin manifests") {
		t.Errorf("two manifests: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "demo.wasm"), []byte("\x00asm\x01\x00\x00\x01"), 0o644)
	if _, err := ReadPlugin(filepath.Join(dir, "demo.plugin.yaml"), ""); !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("changed module: %v", err)
	}
}

func TestKeychainFromSecret(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	cfg := `{"auths":{"https://registry.example:5000/v1/":{"auth":"` + auth + `"}},"credsStore":"evil"}`
	s := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)}}
	s.Namespace, s.Name = "policy", "pull"
	kc, err := KeychainFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"registry.example:5000/p:1": "alice:s3cret",
		"other.example/p:1":         "",
	} {
		r, _ := name.ParseReference(ref)
		a, err := kc.Resolve(r.Context())
		if err != nil {
			t.Fatal(err)
		}
		ac, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if ac.Username != "" {
			got = ac.Username + ":" + ac.Password
		}
		if got != want {
			t.Errorf("%s: %q, want %q", ref, got, want)
		}
	}
	old := &corev1.Secret{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"registry.example":{"username":"bob","password":"pw"}}`)}}
	kc, err = KeychainFromSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := kc.Resolve(name.MustParseReference("registry.example/p:1").Context())
	if ac, _ := a.Authorization(); ac.Username != "bob" {
		t.Errorf("dockercfg: %+v", ac)
	}
	for _, bad := range []*corev1.Secret{
		{Type: corev1.SecretTypeOpaque},
		{Type: corev1.SecretTypeDockerConfigJson},
		{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{")}},
	} {
		if _, err := KeychainFromSecret(bad); err == nil {
			t.Errorf("%s secret accepted", bad.Type)
		}
	}
}

func TestKeychainFromDockerConfigFile(t *testing.T) {
	t.Setenv("DOCKER_AUTH_CONFIG", "")
	path := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("alice:pw"))
	os.WriteFile(path, []byte(`{"auths":{"127.0.0.1:5000":{"auth":"`+auth+`"}}}`), 0o600)
	kc, err := KeychainFromDockerConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kc.Resolve(name.MustParseReference("127.0.0.1:5000/p:1").Context())
	if err != nil {
		t.Fatal(err)
	}
	if ac, _ := a.Authorization(); ac.Username != "alice" || ac.Password != "pw" {
		t.Errorf("got %+v", ac)
	}
	if _, err := KeychainFromDockerConfigFile(path + ".missing"); err == nil {
		t.Error("missing file accepted")
	}
}

func TestClient_Push_unauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/x:1"
	_, err := newClient(t, Config{}).Push(context.Background(), ref, testPlugin(module), Meta{})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), ref) {
		t.Fatalf("error %v, want ErrUnauthorized with 401 naming %s", err, ref)
	}
}
