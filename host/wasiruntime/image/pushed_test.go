package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// TestStore_Import_pushedPlugin imports what `wasmlet plugin push` writes
// (the Wasm OCI artifact: config application/vnd.wasm.config.v0+json, the
// module as its first layer of type application/wasm, then the manifest and
// test layers), copied from a registry into an OCI layout and a tarball:
// the module is the first layer's bytes.
func TestStore_Import_pushedPlugin(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/policies/demo:v1"
	mod := module("pushed")
	sum := sha256.Sum256(mod)
	p := &pluginoci.Plugin{
		Module:   pluginoci.File{Name: "demo.wasm", Data: mod},
		Manifest: pluginoci.File{Name: "demo.plugin.yaml", Data: []byte("name: demo\nversion: 1.0.0\nabi: v1\nkinds: [admission]\nsha256: " + hex.EncodeToString(sum[:]) + "\n")},
		Tests:    []pluginoci.File{{Name: "allow.yaml", Data: []byte("description: allowed\n")}},
	}
	c, err := pluginoci.New(pluginoci.Config{Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(context.Background(), ref, p, pluginoci.Meta{}); err != nil {
		t.Fatal(err)
	}
	r, err := pluginoci.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := img.Manifest(); m.Config.MediaType != ConfigMediaType || m.Layers[0].MediaType != ModuleMediaType {
		t.Fatalf("pushed artifact: config %s, layer 0 %s; the test expects the Wasm OCI layout", m.Config.MediaType, m.Layers[0].MediaType)
	}
	dir := t.TempDir()
	lay := filepath.Join(dir, "layout")
	lp, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "plugin.tar")
	if err := tarball.WriteToFile(tar, r, img); err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{lay, tar} {
		im, err := s.Import("demo:"+filepath.Base(src), src)
		if err != nil {
			t.Fatalf("Import(%s): %v", src, err)
		}
		got, _, err := readSource(src)
		if err != nil || !bytes.Equal(got, mod) {
			t.Fatalf("readSource(%s) = %d bytes, %v; want the pushed module", src, len(got), err)
		}
		if im.Size != uint64(len(mod)) {
			t.Fatalf("Import(%s) size %d, want %d", src, im.Size, len(mod))
		}
	}

	// A layer of type application/wasm that is not WebAssembly is refused,
	// as one of the earlier draft's type is.
	bad, err := mutate.AppendLayers(empty.Image, static.NewLayer([]byte("#!/bin/sh\n"), ModuleMediaType))
	if err != nil {
		t.Fatal(err)
	}
	bad = mutate.ConfigMediaType(mutate.MediaType(bad, types.OCIManifestSchema1), ConfigMediaType)
	badLay := filepath.Join(dir, "bad")
	bp, err := layout.Write(badLay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := bp.AppendImage(bad); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readSource(badLay); err == nil || !strings.Contains(err.Error(), ModuleMediaType) {
		t.Fatalf("readSource(non-Wasm application/wasm layer) = %v, want a refusal naming the type", err)
	}
}
