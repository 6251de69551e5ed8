package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readVisible reads name through the user-visible symlink.
func readVisible(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteAtomic_LayoutAndUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	changed, err := writeAtomic(dir, Payload{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o400}}, nil)
	if err != nil || !changed {
		t.Fatalf("first write: changed %v, %v", changed, err)
	}
	data, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !strings.HasPrefix(data, "..") {
		t.Fatalf("..data → %q, %v: want a timestamped directory", data, err)
	}
	for name, want := range map[string]string{"a": "..data/a", "sub": "..data/sub"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("%s → %q, %v; want %q", name, got, err, want)
		}
	}
	if got := readVisible(t, dir, "sub/b"); got != "2" {
		t.Errorf("sub/b = %q", got)
	}
	fi, err := os.Stat(filepath.Join(dir, "sub/b"))
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("sub/b mode %v, %v; want 0400", fi.Mode(), err)
	}

	// The same payload writes nothing.
	if changed, err := writeAtomic(dir, Payload{"a": {Data: []byte("1"), Mode: 0o644}, "sub/b": {Data: []byte("2"), Mode: 0o400}}, nil); err != nil || changed {
		t.Fatalf("same payload: changed %v, %v", changed, err)
	}
	if got, _ := os.Readlink(filepath.Join(dir, "..data")); got != data {
		t.Errorf("..data moved to %q on an unchanged payload", got)
	}

	// An update swaps ..data, drops the names that went and the old
	// directory.
	if changed, err := writeAtomic(dir, Payload{"a": {Data: []byte("3"), Mode: 0o644}, "c": {Data: []byte("4"), Mode: 0o644}}, nil); err != nil || !changed {
		t.Fatalf("update: changed %v, %v", changed, err)
	}
	if got := readVisible(t, dir, "a"); got != "3" {
		t.Errorf("a = %q after the update", got)
	}
	if got := readVisible(t, dir, "c"); got != "4" {
		t.Errorf("c = %q after the update", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("sub still there after the update: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, data)); !os.IsNotExist(err) {
		t.Errorf("old data directory %s still there: %v", data, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 4 { // ..<ts>, ..data, a, c
		t.Errorf("volume holds %v, want the data directory, ..data, a and c", names)
	}

	// A mode change alone is a change.
	if changed, err := writeAtomic(dir, Payload{"a": {Data: []byte("3"), Mode: 0o600}, "c": {Data: []byte("4"), Mode: 0o644}}, nil); err != nil || !changed {
		t.Fatalf("mode change: changed %v, %v", changed, err)
	}
}

func TestWriteAtomic_RefusesBadPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	for _, p := range []string{"", "/abs", "../up", "a/../../b", "..data", "a//b", "..hidden"} {
		if _, err := writeAtomic(dir, Payload{p: {Data: []byte("x"), Mode: 0o644}}, nil); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

func TestWriteAtomic_FSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's group to an arbitrary gid needs root")
	}
	dir := filepath.Join(t.TempDir(), "vol")
	gid := int64(1234)
	if _, err := writeAtomic(dir, Payload{"k": {Data: []byte("v"), Mode: 0o400}}, &gid); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o440 {
		t.Errorf("mode %v, want 0440 (group read added)", fi.Mode().Perm())
	}
	if g := fileGID(fi); g != 1234 {
		t.Errorf("gid %d, want 1234", g)
	}
	// Rewriting the same payload is no change, although the group bit
	// was added.
	if changed, err := writeAtomic(dir, Payload{"k": {Data: []byte("v"), Mode: 0o400}}, &gid); err != nil || changed {
		t.Errorf("same payload with fsGroup: changed %v, %v", changed, err)
	}
}
