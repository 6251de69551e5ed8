// Command mkimage writes a single-layer container image tarball (the
// `docker save` format that `ctr images import` reads) from a local
// directory tree, offline. hack/e2e.sh uses it to build the busybox, pause and
// testbox images because no registry is reachable in CI.
//
//	mkimage -o busybox.tar -ref wasmlet.local/busybox:1.0 -entrypoint /bin/sh ROOTFS
//
// Files keep their modes and symlinks; owners become root; modification
// times are fixed so the same tree always gives the same layer digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is every file's modification time, for reproducible layers.
var epoch = time.Unix(0, 0).UTC()

func main() {
	out := flag.String("o", "", "output tarball")
	ref := flag.String("ref", "", "fully qualified image reference, e.g. wasmlet.local/busybox:1.0")
	entrypoint := flag.String("entrypoint", "", "image entrypoint (space separated)")
	cmd := flag.String("cmd", "", "image command (space separated)")
	user := flag.String("user", "", "the image's user (uid[:gid] or a name in its /etc/passwd)")
	flag.Parse()
	if *out == "" || *ref == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -o OUT.tar -ref REF [-entrypoint CMD] [-cmd ARGS] [-user USER] ROOTFS")
		os.Exit(2)
	}
	if err := write(*out, *ref, flag.Arg(0), strings.Fields(*entrypoint), strings.Fields(*cmd), *user); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %s: %v\n", *ref, err)
		os.Exit(1)
	}
}

func write(out, ref, root string, entrypoint, cmd []string, user string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return err
	}
	layerTar, err := tarDir(root)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = entrypoint
	cf.Config.Cmd = cmd
	cf.Config.User = user
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// tarDir returns an uncompressed tar of the tree under root, paths relative
// to it, with directories, regular files and symlinks.
func tarDir(root string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "root", "root"
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, time.Time{}, time.Time{}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
