// Package image is the embedded runtime's image store: WASI command modules
// on disk under one directory, addressed by name (a reference such as
// "wasmlet.local/testbox:1.0" or "file:///abs/app.wasm") and by ID (the
// module's sha256 digest, "sha256:<hex>").
//
// Layout under the store's directory:
//
//	blobs/sha256/<hex>    the module bytes
//	names/<escaped name>  one small JSON record per name → digest
//
// Every write is a rename of a complete file, so a `wasmlet runtime import`
// in another process and a running runtime share the store safely; nothing
// is cached in memory.
package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	gname "github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Image is one module in the store.
type Image struct {
	// ID is "sha256:<hex>" of the module bytes.
	ID string
	// Names are the references that resolve to this image, sorted.
	Names []string
	// Size is the module's size in bytes.
	Size uint64
	// Path is the module file.
	Path string
	// Entrypoint and Cmd come from an OCI image config when the image was
	// imported from one that has them; empty otherwise.
	Entrypoint, Cmd []string
}

// ErrNotFound is returned (wrapped) when a reference names no image.
var ErrNotFound = errors.New("image not found")

// Store is an image store rooted at one directory. Its methods are safe for
// concurrent use.
type Store struct {
	dir string
	mu  sync.Mutex
}

// record is the JSON kept per name.
type record struct {
	Name       string    `json:"name"`
	Digest     string    `json:"digest"`
	Source     string    `json:"source,omitempty"`
	Imported   time.Time `json:"imported"`
	Entrypoint []string  `json:"entrypoint,omitempty"`
	Cmd        []string  `json:"cmd,omitempty"`
}

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	for _, d := range []string{filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, "names")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("image store %s: %w", dir, err)
		}
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Normalize returns the canonical form of a reference: file references are
// kept as given, any other name without a tag or digest gets ":latest".
func Normalize(ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" || isSourceRef(ref) || strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.ContainsAny(last, ":@") {
		return ref + ":latest"
	}
	return ref
}

// isSourceRef reports whether ref names a file to import rather than a name.
func isSourceRef(ref string) bool {
	return strings.HasPrefix(ref, "file://") || strings.HasPrefix(ref, "/")
}

// SourcePath returns the file a reference points at, and whether it is one
// ("file:///abs/x.wasm" and "/abs/x.wasm" are; names are not).
func SourcePath(ref string) (string, bool) {
	switch {
	case strings.HasPrefix(ref, "file://"):
		u, err := url.Parse(ref)
		if err != nil || u.Path == "" {
			return strings.TrimPrefix(ref, "file://"), true
		}
		return u.Path, true
	case strings.HasPrefix(ref, "/"):
		return ref, true
	}
	return "", false
}

// Resolve finds the image a reference names: a name, an image ID
// ("sha256:<hex>"), or a unique prefix of at least 12 hex digits of an ID.
// It returns an error wrapping ErrNotFound when none matches.
func (s *Store) Resolve(ref string) (Image, error) {
	ref = Normalize(ref)
	if ref == "" {
		return Image{}, fmt.Errorf("empty image reference: %w", ErrNotFound)
	}
	if rec, err := s.readRecord(ref); err == nil {
		return s.image(rec.Digest)
	} else if !errors.Is(err, os.ErrNotExist) {
		return Image{}, err
	}
	hexID := strings.TrimPrefix(ref, "sha256:")
	if len(hexID) >= 12 && isHex(hexID) {
		ents, err := os.ReadDir(filepath.Join(s.dir, "blobs", "sha256"))
		if err != nil {
			return Image{}, err
		}
		var found []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), hexID) && !strings.HasPrefix(e.Name(), ".") {
				found = append(found, e.Name())
			}
		}
		if len(found) == 1 {
			return s.image("sha256:" + found[0])
		}
		if len(found) > 1 {
			return Image{}, fmt.Errorf("image %q is ambiguous (%d images)", ref, len(found))
		}
	}
	return Image{}, fmt.Errorf("image %q: %w", ref, ErrNotFound)
}

// List returns every image, sorted by ID.
func (s *Store) List() ([]Image, error) {
	recs, err := s.records()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := []Image{}
	for _, r := range recs {
		if seen[r.Digest] {
			continue
		}
		seen[r.Digest] = true
		img, err := s.imageOf(r.Digest, recs)
		if err != nil {
			continue // a name whose blob is gone: not an image
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Remove deletes the image a reference resolves to, with all its names, as
// containerd's RemoveImage does. Removing an unknown image is not an error.
func (s *Store) Remove(ref string) error {
	img, err := s.Resolve(ref)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range img.Names {
		if err := os.Remove(s.namePath(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove image %s: %w", n, err)
		}
	}
	if err := os.Remove(img.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove image %s: %w", img.ID, err)
	}
	return nil
}

// Usage returns the bytes and inodes the store uses.
func (s *Store) Usage() (bytes, inodes uint64, err error) { return DirUsage(s.dir) }

// DirUsage returns the bytes of the regular files under dir and the number
// of inodes (files and directories) there.
func DirUsage(dir string) (bytes, inodes uint64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		inodes++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				bytes += uint64(fi.Size())
			}
		}
		return nil
	})
	return bytes, inodes, err
}

// Import reads a module from source — a .wasm file, an OCI image layout
// directory, or an image tarball, as a path or a file:// URL — and stores it
// under name (normalized). An empty name means the source reference itself.
func (s *Store) Import(name, source string) (Image, error) {
	if name == "" {
		name = source
	}
	name = Normalize(name)
	path, ok := SourcePath(source)
	if !ok {
		path = source
	}
	mod, meta, err := readSource(path)
	if err != nil {
		return Image{}, fmt.Errorf("import image %s from %s: %w", name, path, err)
	}
	return s.add(name, mod, meta, path)
}

// add stores module bytes under name (normalized); meta's entrypoint and cmd
// are optional defaults, source is recorded for humans.
func (s *Store) add(name string, module []byte, meta sourceMeta, source string) (Image, error) {
	if err := checkMagic(module); err != nil {
		return Image{}, fmt.Errorf("image %s: %w", name, err)
	}
	sum := sha256.Sum256(module)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	blob := s.blobPath(digest)
	if _, err := os.Stat(blob); err != nil {
		if err := writeFileAtomic(blob, module); err != nil {
			return Image{}, fmt.Errorf("image %s: %w", name, err)
		}
	}
	rec := record{Name: name, Digest: digest, Source: source, Imported: time.Now().UTC(), Entrypoint: meta.entrypoint, Cmd: meta.cmd}
	b, err := json.Marshal(rec)
	if err != nil {
		return Image{}, err
	}
	if err := writeFileAtomic(s.namePath(name), b); err != nil {
		return Image{}, fmt.Errorf("image %s: %w", name, err)
	}
	return s.image(digest)
}

func (s *Store) image(digest string) (Image, error) {
	recs, err := s.records()
	if err != nil {
		return Image{}, err
	}
	return s.imageOf(digest, recs)
}

// imageOf is the image of digest with its names taken from recs.
func (s *Store) imageOf(digest string, recs []record) (Image, error) {
	path := s.blobPath(digest)
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Image{}, fmt.Errorf("image %s: %w", digest, ErrNotFound)
		}
		return Image{}, err
	}
	img := Image{ID: digest, Size: uint64(fi.Size()), Path: path}
	for _, r := range recs {
		if r.Digest == digest {
			img.Names = append(img.Names, r.Name)
			if img.Entrypoint == nil && img.Cmd == nil {
				img.Entrypoint, img.Cmd = r.Entrypoint, r.Cmd
			}
		}
	}
	sort.Strings(img.Names)
	return img, nil
}

func (s *Store) records() ([]record, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "names"))
	if err != nil {
		return nil, err
	}
	recs := make([]record, 0, len(ents))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		name, err := url.PathUnescape(e.Name())
		if err != nil {
			continue
		}
		if r, err := s.readRecord(name); err == nil {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

func (s *Store) readRecord(name string) (record, error) {
	b, err := os.ReadFile(s.namePath(name))
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("image store %s: name %q: %w", s.dir, name, err)
	}
	return r, nil
}

func (s *Store) namePath(name string) string {
	return filepath.Join(s.dir, "names", url.PathEscape(name))
}

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// wasmMagic starts every binary Wasm module.
var wasmMagic = []byte("\x00asm")

func checkMagic(b []byte) error {
	if !bytes.HasPrefix(b, wasmMagic) {
		return errors.New("not a WebAssembly module (no \\0asm header)")
	}
	return nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, bytes.NewReader(b)); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// pulledPrefix starts the source recorded for an image pulled from a
// registry.
const pulledPrefix = "registry "

// Pull reads the Wasm image ref names from its registry with opts (the
// first image of an index), takes its module as an import does and stores
// it under name (normalized), recording the manifest's digest.
func (s *Store) Pull(name string, ref gname.Reference, opts ...remote.Option) (Image, error) {
	name = Normalize(name)
	fail := func(err error) (Image, error) { return Image{}, fmt.Errorf("pull image %s: %w", ref, err) }
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return fail(err)
	}
	var img ggcrv1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return fail(err)
		}
		img, err = firstImage(idx, 0)
	} else {
		img, err = desc.Image()
	}
	if err != nil {
		return fail(err)
	}
	mod, meta, err := moduleOf(img)
	if err != nil {
		return fail(err)
	}
	return s.add(name, mod, meta, pulledPrefix+ref.Context().Digest(desc.Digest.String()).String())
}

// Imported reports whether name (normalized) is in the store from a file
// or `wasmlet runtime import` rather than from a registry pull.
func (s *Store) Imported(name string) bool {
	rec, err := s.readRecord(Normalize(name))
	return err == nil && !strings.HasPrefix(rec.Source, pulledPrefix)
}
