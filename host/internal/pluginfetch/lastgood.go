package pluginfetch

import (
	"reflect"

	"github.com/wasmlet/wasmlet/abi"
)

// lastGoodFile keeps, per reference manifest, the last reference that
// resolved to a kept, verified plugin: after a restart whose reference
// cannot be resolved, pulled or verified (a new image nobody signed, the
// registry unreachable before the new digest was kept), that version is
// enforced, as it was before the restart.
const lastGoodFile = "last-good.json"

// lastGood is one reference manifest's last good resolution.
type lastGood struct {
	// Ref is the reference manifest as it was then (its image, its
	// verification and the node's settings).
	Ref abi.Manifest `json:"ref"`
	// Digest is what it resolved to.
	Digest string `json:"digest"`
}

// loadLastGood reads the last good resolutions; a missing file is none.
func (c cache) loadLastGood() (map[string]lastGood, error) {
	return loadJSON[lastGood](c.dir, lastGoodFile)
}

// saveLastGood writes the last good resolutions atomically.
func (c cache) saveLastGood(m map[string]lastGood) error { return saveJSON(c.dir, lastGoodFile, m) }

// rememberGood records that the reference manifest at path resolved to
// digest, persisting it when that is news.
func (f *Fetcher) rememberGood(path string, ref abi.Manifest, digest string) {
	f.mu.Lock()
	g := lastGood{Ref: ref, Digest: digest}
	if old, ok := f.good[path]; ok && old.Digest == g.Digest && reflect.DeepEqual(old.Ref, g.Ref) {
		f.mu.Unlock()
		return
	}
	f.good[path] = g
	snapshot := make(map[string]lastGood, len(f.good))
	for k, v := range f.good {
		snapshot[k] = v
	}
	f.mu.Unlock()
	if err := f.cache.saveLastGood(snapshot); err != nil {
		f.cfg.Logger.Warn("plugin cache: cannot remember the last good version; a restart needs the registry", "plugin", ref.Name, "error", err)
	}
}

// forgetGood drops the last good resolutions of reference manifests that
// are gone.
func (f *Fetcher) forgetGood(present map[string]abi.Manifest) {
	f.mu.Lock()
	changed := false
	for path := range f.good {
		if _, ok := present[path]; !ok {
			delete(f.good, path)
			changed = true
		}
	}
	snapshot := make(map[string]lastGood, len(f.good))
	for k, v := range f.good {
		snapshot[k] = v
	}
	f.mu.Unlock()
	if changed {
		if err := f.cache.saveLastGood(snapshot); err != nil {
			f.cfg.Logger.Warn("plugin cache: cannot update the last good versions", "error", err)
		}
	}
}

// fallback is the last good version of the reference manifest at path,
// when it is still kept verified: what stays enforced while the current
// reference fails.
func (f *Fetcher) fallback(path string) (reference, bool) {
	f.mu.Lock()
	g, ok := f.good[path]
	f.mu.Unlock()
	if !ok {
		return reference{}, false
	}
	rf, err := f.parse(path, g.Ref)
	if err != nil {
		return reference{}, false
	}
	return rf, true
}
