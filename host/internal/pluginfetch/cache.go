package pluginfetch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/wasmlet/wasmlet/host/internal/regularfile"
)

// The cache holds verified artifacts by digest:
//
//	<dir>/sha256/<hex>/module.wasm           the module
//	<dir>/sha256/<hex>/manifest.plugin.yaml  the artifact's own manifest
//	<dir>/sha256/<hex>/verified-<req>        the marker: verified against requirement <req>
//	<dir>/tags.json                          reference+requirement → digest, for a start with the registry down
//
// An artifact directory is written under a temporary name and renamed into
// place with its first marker already in it, the marker written last; a
// marker for another requirement is written beside it by rename too. A
// directory without the marker for the requirement at hand is never read,
// so nothing half-written is loaded.
const (
	moduleFile   = "module.wasm"
	manifestFile = "manifest.plugin.yaml"
	markerPrefix = "verified-"
	tagsFile     = "tags.json"
	tmpPrefix    = ".tmp-"
)

// marker is the content of a verified-<req> file.
type marker struct {
	Image      string    `json:"image"`
	Digest     string    `json:"digest"`
	VerifiedAt time.Time `json:"verifiedAt"`
}

// cache is the on-disk store under one directory.
type cache struct{ dir string }

// artifactDir is where digest d is kept.
func (c cache) artifactDir(d v1.Hash) string {
	return filepath.Join(c.dir, d.Algorithm, d.Hex)
}

func (c cache) markerPath(d v1.Hash, req string) string {
	return filepath.Join(c.artifactDir(d), markerPrefix+req)
}

// verified reports whether d is kept and verified against req.
func (c cache) verified(d v1.Hash, req string) bool {
	_, err := os.Stat(c.markerPath(d, req))
	return err == nil
}

// present reports whether d is kept (verified against some requirement).
func (c cache) present(d v1.Hash) bool {
	_, err := os.Stat(filepath.Join(c.artifactDir(d), manifestFile))
	return err == nil
}

// read returns the artifact manifest's bytes and the module's path of a
// verified digest.
func (c cache) read(d v1.Hash, req string) (manifest []byte, modulePath string, err error) {
	if !c.verified(d, req) {
		return nil, "", fmt.Errorf("%s is not in the cache verified", d)
	}
	dir := c.artifactDir(d)
	if manifest, err = os.ReadFile(filepath.Join(dir, manifestFile)); err != nil {
		return nil, "", err
	}
	return manifest, filepath.Join(dir, moduleFile), nil
}

// store keeps a pulled, verified artifact: written into a temporary
// directory (module, manifest, then the marker, each synced), renamed into
// place. When d is already kept, only the marker is added.
func (c cache) store(d v1.Hash, module, manifest []byte, req string, m marker) error {
	final := c.artifactDir(d)
	if c.present(d) {
		return c.mark(d, req, m)
	}
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, tmpPrefix+d.Hex+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the rename; a leftover otherwise
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{moduleFile, module}, {manifestFile, manifest}, {markerPrefix + req, mb}} {
		if err := writeSynced(filepath.Join(tmp, f.name), f.b); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if c.present(d) { // kept meanwhile by another resolution
			return c.mark(d, req, m)
		}
		return err
	}
	return syncDir(parent)
}

// mark adds the marker for req to a kept digest.
func (c cache) mark(d v1.Hash, req string, m marker) error {
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return regularfile.WriteAtomic(c.markerPath(d, req), mb)
}

// clean removes what a crash left: temporary directories of the store.
func (c cache) clean() {
	ents, _ := os.ReadDir(filepath.Join(c.dir, "sha256"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			os.RemoveAll(filepath.Join(c.dir, "sha256", e.Name()))
		}
	}
}

// loadTags reads the remembered resolutions; a missing file is none.
func (c cache) loadTags() (map[string]string, error) { return loadJSON[string](c.dir, tagsFile) }

// saveTags writes the remembered resolutions atomically.
func (c cache) saveTags(tags map[string]string) error { return saveJSON(c.dir, tagsFile, tags) }

// loadJSON reads the map in dir/name; a missing file is an empty map, an
// unreadable one an empty map and the error.
func loadJSON[V any](dir, name string) (map[string]V, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]V{}, nil
	}
	if err != nil {
		return map[string]V{}, err
	}
	m := map[string]V{}
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]V{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// saveJSON writes m to dir/name atomically.
func saveJSON[V any](dir, name string, m map[string]V) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return regularfile.WriteAtomic(filepath.Join(dir, name), b)
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
