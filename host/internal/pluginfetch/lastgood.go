package pluginfetch

import (
	"context"
	"reflect"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// lastGoodFile keeps, per reference manifest, the last version that
// loaded (pluginhost.Resolver.Loaded): the reference manifest of then and
// the digest it resolved to. After a restart whose reference cannot be
// resolved, pulled or verified (a new image nobody signed, the registry
// unreachable before the new digest was kept), or whose version resolves
// but does not load (a config the plugin refuses), that version is
// enforced, as it was before the restart. A version that resolved and never
// loaded does not become it.
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

// Loaded implements pluginhost.Resolver: res, of the reference manifest at
// path, loaded and is now its last good version, persisted.
func (f *Fetcher) Loaded(path string, res pluginhost.Resolved) {
	f.rememberGood(path, res.Ref, res.Digest)
}

// Fallback implements pluginhost.Resolver: the last good version of the
// reference manifest at path, when path names another reference manifest
// now and that version is still kept verified.
func (f *Fetcher) Fallback(_ context.Context, path string) (pluginhost.Resolved, bool) {
	f.mu.Lock()
	cur, watched := f.watched[path]
	f.mu.Unlock()
	if !watched {
		return pluginhost.Resolved{}, false
	}
	return f.lastGoodOf(path, cur)
}

// lastGoodOf is the last good version of the reference manifest at path,
// read from the cache, when it is still kept verified and its reference
// manifest is not cur (the one that failed).
func (f *Fetcher) lastGoodOf(path string, cur abi.Manifest) (pluginhost.Resolved, bool) {
	f.mu.Lock()
	g, ok := f.good[path]
	f.mu.Unlock()
	if !ok || reflect.DeepEqual(g.Ref, cur) {
		return pluginhost.Resolved{}, false
	}
	rf, err := f.parse(path, g.Ref)
	if err != nil {
		return pluginhost.Resolved{}, false
	}
	h, err := v1.NewHash(g.Digest)
	if err != nil || !f.cache.verified(h, rf.req) {
		return pluginhost.Resolved{}, false
	}
	res, err := f.resolved(rf, h)
	if err != nil {
		return pluginhost.Resolved{}, false
	}
	return res, true
}
