package pluginfetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// Modules the plugin host's tests build: both implement admission.
const (
	moduleV1 = "../pluginhost/testdata/wat/ok.wasm"
	moduleV2 = "../pluginhost/testdata/wat/work.wasm"
)

// testRegistry is go-containerregistry's in-memory registry on loopback;
// close stops it (the registry is then down).
type testRegistry struct {
	host  string
	close func()
}

func newRegistry(t *testing.T) *testRegistry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return &testRegistry{host: u.Host, close: srv.Close}
}

func newClient(t *testing.T, lim pluginoci.Limits) *pluginoci.Client {
	t.Helper()
	c, err := pluginoci.New(pluginoci.Config{Keychain: authn.NewMultiKeychain(), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// push pushes the module file wasm as plugin "policy" at version, its
// manifest asking for perms (YAML under permissions:, may be empty), and
// returns the digest.
func push(t *testing.T, ref, wasm, version, perms string) v1.Hash {
	t.Helper()
	return pushWith(t, newClient(t, pluginoci.Limits{}), ref, wasm, version, perms)
}

// pushWith is push by client c.
func pushWith(t *testing.T, c *pluginoci.Client, ref, wasm, version, perms string) v1.Hash {
	t.Helper()
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	mf := fmt.Sprintf("name: policy\nversion: %s\nabi: v1\nkinds: [admission]\nsha256: %s\n", version, hex.EncodeToString(sum[:]))
	if perms != "" {
		mf += "permissions:\n" + perms
	}
	p := &pluginoci.Plugin{
		Module:   pluginoci.File{Name: "policy.wasm", Data: b},
		Manifest: pluginoci.File{Name: "policy.plugin.yaml", Data: []byte(mf)},
	}
	d, err := c.Push(context.Background(), ref, p, pluginoci.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// writeRef writes a reference manifest for image into dir and returns its
// path and the manifest as parsed.
func writeRef(t *testing.T, dir, image, extra string) (string, abi.Manifest) {
	t.Helper()
	path := filepath.Join(dir, "policy.plugin.yaml")
	doc := "name: policy\nimage: " + image + "\n" + extra
	if err := os.WriteFile(path+".tmp", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	var m abi.Manifest
	if err := abiParse(doc, &m); err != nil {
		t.Fatal(err)
	}
	return path, m
}

// fakeVerifier accepts or refuses, and records the digests it was asked
// about.
type fakeVerifier struct {
	mu     sync.Mutex
	refuse error
	asked  []string
}

func (v *fakeVerifier) Verify(_ context.Context, ref name.Digest, _ *abi.Verification, _ string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, ref.DigestStr())
	return v.refuse
}

func (v *fakeVerifier) set(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refuse = err
}

// newFetcher returns a Fetcher over dir with its own metrics registry.
func newFetcher(t *testing.T, cfg Config) (*Fetcher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, reg
}

// fetchErrors is wasmlet_plugin_fetch_errors_total{plugin="policy",reason}.
func fetchErrors(f *Fetcher, reason string) float64 {
	var m dto.Metric
	if err := f.errors.WithLabelValues("policy", reason).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func mustDigest(t *testing.T) name.Digest {
	t.Helper()
	d, err := name.NewDigest("r.example/p@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
