package image

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// module is a minimal valid Wasm module with a distinguishing custom section.
func module(tag string) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	sec := append([]byte{byte(len(tag))}, tag...)
	return append(append(b, 0, byte(len(sec))), sec...)
}

// wasmImage is a CNCF Wasm OCI artifact holding mod.
func wasmImage(t *testing.T, mod []byte, entrypoint []string) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(mod, LayerMediaType))
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	if entrypoint != nil {
		img, err = mutate.Config(img, v1.Config{Entrypoint: entrypoint})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		img = mutate.ConfigMediaType(img, ConfigMediaType)
	}
	return img
}

func TestStore_Import(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.wasm")
	if err := os.WriteFile(plain, module("plain"), 0o644); err != nil {
		t.Fatal(err)
	}
	lay := filepath.Join(dir, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(wasmImage(t, module("layout"), nil)); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "image.tar")
	tag, _ := name.NewTag("wasmlet.local/tar:1")
	if err := tarball.WriteToFile(tar, tag, wasmImage(t, module("tarball"), []string{"/app.wasm", "serve"})); err != nil {
		t.Fatal(err)
	}
	notWasm := filepath.Join(dir, "text.wasm")
	if err := os.WriteFile(notWasm, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, ref, source string
		wantMod           []byte
		wantEntrypoint    []string
		wantErr           string
	}{
		{"plain", "wasmlet.local/plain", plain, module("plain"), nil, ""},
		{"file-url", "", "file://" + plain, module("plain"), nil, ""},
		{"layout", "wasmlet.local/layout:2", lay, module("layout"), nil, ""},
		{"tarball", "wasmlet.local/tar:1", tar, module("tarball"), []string{"/app.wasm", "serve"}, ""},
		{"not-wasm", "wasmlet.local/text:1", notWasm, nil, nil, "is neither a Wasm module"},
		{"missing", "wasmlet.local/missing:1", filepath.Join(dir, "nope.wasm"), nil, nil, "no such file"},
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := s.Import(tt.ref, tt.source)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Import = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(img.Path)
			if err != nil || string(b) != string(tt.wantMod) {
				t.Errorf("stored module = %q, %v; want %q", b, err, tt.wantMod)
			}
			if strings.Join(img.Entrypoint, " ") != strings.Join(tt.wantEntrypoint, " ") {
				t.Errorf("Entrypoint = %q, want %q", img.Entrypoint, tt.wantEntrypoint)
			}
			ref := tt.ref
			if ref == "" {
				ref = tt.source
			}
			got, err := s.Resolve(ref)
			if err != nil || got.ID != img.ID {
				t.Errorf("Resolve(%q) = %v, %v; want %s", ref, got.ID, err, img.ID)
			}
			if got, err := s.Resolve(img.ID[:19]); err != nil || got.ID != img.ID {
				t.Errorf("Resolve(ID prefix) = %v, %v", got.ID, err)
			}
		})
	}

	// plain.wasm is one image with two names.
	imgs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 3 {
		t.Fatalf("List = %d images, want 3: %+v", len(imgs), imgs)
	}
	plainImg, _ := s.Resolve("wasmlet.local/plain:latest")
	if want := []string{"file://" + plain, "wasmlet.local/plain:latest"}; strings.Join(plainImg.Names, ",") != strings.Join(want, ",") {
		t.Errorf("Names = %v, want %v", plainImg.Names, want)
	}
	if err := s.Remove("wasmlet.local/plain"); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"wasmlet.local/plain:latest", "file://" + plain, plainImg.ID} {
		if _, err := s.Resolve(ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q) after Remove = %v, want ErrNotFound", ref, err)
		}
	}
	if err := s.Remove("wasmlet.local/plain"); err != nil {
		t.Errorf("second Remove = %v", err)
	}
	// Another process's import is seen at once: nothing is cached.
	other, _ := Open(s.Dir())
	if _, err := other.Import("wasmlet.local/late:1", plain); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve("wasmlet.local/late:1"); err != nil {
		t.Errorf("import by another store is not visible: %v", err)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"testbox":                       "testbox:latest",
		"wasmlet.local/testbox":         "wasmlet.local/testbox:latest",
		"wasmlet.local:5000/testbox":    "wasmlet.local:5000/testbox:latest",
		"wasmlet.local/testbox:1.0":     "wasmlet.local/testbox:1.0",
		"wasmlet.local/t@sha256:abcdef": "wasmlet.local/t@sha256:abcdef",
		"file:///x/y.wasm":              "file:///x/y.wasm",
		"/x/y.wasm":                     "/x/y.wasm",
		"sha256:abcdef":                 "sha256:abcdef",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
