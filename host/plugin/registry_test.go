package plugin_test

import (
	"bytes"
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
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/wasmlet/wasmlet/host/plugin"
)

func TestPushPull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	src := t.TempDir()
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	sum := sha256.Sum256(wasm)
	files := map[string]string{
		"p.wasm":         string(wasm),
		"p.plugin.yaml":  fmt.Sprintf("name: p\nversion: 1.0.0\nabi: v1\nkinds: [admission]\nsha256: %s\n", hex.EncodeToString(sum[:])),
		"tests/one.yaml": "description: one\n",
	}
	os.Mkdir(filepath.Join(src, "tests"), 0o755)
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(src, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An empty docker config: anonymous, whatever the user running the test has.
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfgFile, []byte(`{"auths":{}}`), 0o600)
	reg := plugin.RegistryConfig{DockerConfig: cfgFile}
	ref := u.Host + "/policies/p:1.0.0"
	ctx := context.Background()
	digest, err := plugin.Push(ctx, plugin.PushConfig{Path: src, Ref: ref, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "pulled")
	got, err := plugin.Pull(ctx, plugin.PullConfig{Ref: ref, Dir: dst, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != digest || len(got.Files) != 3 {
		t.Errorf("pulled %+v, pushed %s", got, digest)
	}
	for n, want := range files {
		b, err := os.ReadFile(filepath.Join(dst, n))
		if err != nil || !bytes.Equal(b, []byte(want)) {
			t.Errorf("%s: %q, %v", n, b, err)
		}
	}
}
