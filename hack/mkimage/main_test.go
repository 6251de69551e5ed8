package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tree makes a small root filesystem: a binary, a directory and a symlink.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "box"), []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("box", filepath.Join(root, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestWrite(t *testing.T) {
	root := tree(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	const ref = "wasmlet.local/box:1.0"
	if err := write(out, ref, root, []string{"/bin/sh"}, []string{"-c", "true"}, "1234"); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || !slices.Equal(cf.Config.Entrypoint, []string{"/bin/sh"}) || !slices.Equal(cf.Config.Cmd, []string{"-c", "true"}) || cf.Config.User != "1234" {
		t.Errorf("config: os %q entrypoint %q cmd %q user %q", cf.OS, cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: owner %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			got[h.Name] = "-> " + h.Linkname
		case tar.TypeReg:
			b, _ := io.ReadAll(tr)
			got[h.Name] = string(b)
		case tar.TypeDir:
			got[h.Name] = "dir"
		}
	}
	want := map[string]string{"bin/": "dir", "bin/box": "#!binary", "bin/sh": "-> box"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("layer entry %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

// The same tree gives the same image, so the e2e image cache and
// containerd's content store see one digest.
func TestWrite_Reproducible(t *testing.T) {
	root := tree(t)
	dir := t.TempDir()
	var digests []string
	for _, f := range []string{"a.tar", "b.tar"} {
		out := filepath.Join(dir, f)
		if err := write(out, "wasmlet.local/box:1.0", root, []string{"/bin/sh"}, nil, ""); err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("digests differ: %v", digests)
	}
}
