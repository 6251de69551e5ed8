package volumes

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File is one file of a payload: its content and permission bits.
type File struct {
	// Data is the file's content.
	Data []byte
	// Mode is the file's permission bits.
	Mode fs.FileMode
}

// Payload is the content of an API-data volume (configMap, secret,
// downwardAPI, projected): relative path → file.
type Payload map[string]File

const (
	dataDir    = "..data"
	dataDirTmp = "..data_tmp"
)

// writeAtomic makes dir hold exactly payload, in the kubelet's atomic
// writer layout: the files live in a timestamped directory
// "..<time>.<random>", the symlink "..data" points at it, and every
// top-level name the user sees is a symlink through "..data". An update
// writes a new timestamped directory and swaps "..data" with one rename,
// so a reader sees the old payload or the new one, never half of each.
// Nothing is written when the payload equals what is there; changed says
// whether it was. gid, when not nil, is the pod's fsGroup: files and
// directories get that group (setgid directories, group-readable files).
func writeAtomic(dir string, payload Payload, gid *int64) (changed bool, err error) {
	for p := range payload {
		if err := checkPath(p); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	old, err := os.Readlink(filepath.Join(dir, dataDir))
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	if old != "" && sameContent(filepath.Join(dir, old), payload) {
		return false, linkVisible(dir, payload, nil)
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		os.RemoveAll(ts)
		return false, err
	}
	if err := writeTree(ts, payload, gid); err != nil {
		os.RemoveAll(ts)
		return false, err
	}
	tmp := filepath.Join(dir, dataDirTmp)
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		os.RemoveAll(ts)
		return false, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDir)); err != nil {
		os.Remove(tmp)
		os.RemoveAll(ts)
		return false, err
	}
	var oldVisible []string
	if old != "" {
		oldVisible = visibleNames(filepath.Join(dir, old))
	}
	if err := linkVisible(dir, payload, oldVisible); err != nil {
		return true, err
	}
	if old != "" && old != filepath.Base(ts) {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return true, err
		}
	}
	return true, nil
}

// checkPath refuses a payload path that is empty, absolute, or has a ".."
// element or an element starting with ".." (the writer's own names).
func checkPath(p string) error {
	if p == "" || filepath.IsAbs(p) {
		return fmt.Errorf("invalid path %q: must be relative and not empty", p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." || strings.HasPrefix(e, "..") {
			return fmt.Errorf("invalid path %q: an element must not be or start with '..'", p)
		}
		if e == "" {
			return fmt.Errorf("invalid path %q: empty element", p)
		}
	}
	if len(p) > 4096 {
		return fmt.Errorf("invalid path %q: longer than 4096 bytes", p[:64]+"...")
	}
	return nil
}

// writeTree writes payload under root.
func writeTree(root string, payload Payload, gid *int64) error {
	for _, p := range slices.Sorted(maps.Keys(payload)) {
		f := payload[p]
		path := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.Data, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(path, f.Mode.Perm()); err != nil {
			return err
		}
	}
	if gid != nil {
		return setOwnership(root, *gid, true)
	}
	return nil
}

// sameContent reports whether the files under dir are exactly payload.
func sameContent(dir string, payload Payload) bool {
	seen := 0
	same := true
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !same {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		f, ok := payload[filepath.ToSlash(rel)]
		if !ok || !d.Type().IsRegular() {
			same = false
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != f.Mode.Perm() && !ownershipWidened(info.Mode().Perm(), f.Mode.Perm()) {
			same = false
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, f.Data) {
			same = false
		}
		seen++
		return nil
	})
	return err == nil && same && seen == len(payload)
}

// ownershipWidened: the file's mode is the payload's plus the group bits
// fsGroup ownership adds, so it is unchanged.
func ownershipWidened(have, want fs.FileMode) bool {
	return have == want|roGroupMask
}

// visibleNames are the top-level names of a timestamped directory.
func visibleNames(ts string) []string {
	ents, err := os.ReadDir(ts)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// linkVisible makes a symlink "<name>" → "..data/<name>" for every
// top-level name of payload and removes those of old that are gone.
func linkVisible(dir string, payload Payload, old []string) error {
	want := map[string]bool{}
	for p := range payload {
		top, _, _ := strings.Cut(p, "/")
		want[top] = true
	}
	for name := range want {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataDir, name)
		if t, err := os.Readlink(link); err == nil && t == target {
			continue
		}
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	for _, name := range old {
		if !want[name] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}
