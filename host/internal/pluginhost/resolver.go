package pluginhost

import (
	"context"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// Resolver brings the plugins that reference manifests name: a manifest of
// the directory that sets image (abi.Manifest.Image) holds no module; the
// Resolver turns it into the module's bytes (a file it keeps) and the
// effective manifest. host/internal/pluginfetch implements it over an OCI
// registry.
type Resolver interface {
	// Stamps is called at every scan with the directory's reference
	// manifests by path, parsed and validated. It returns, for each path,
	// what identifies the plugin it names now — for a tag, the digest it
	// last resolved to and holds verified; "" while none — without
	// reaching the registry; a path whose stamp changes is loaded again.
	// From then on the Resolver keeps exactly these references resolved.
	Stamps(refs map[string]abi.Manifest) map[string]string
	// Resolve returns the plugin the reference manifest at path names,
	// fetching it when it does not hold it. Errors name the plugin, the
	// reference and the reason.
	Resolve(ctx context.Context, path string, ref abi.Manifest) (Resolved, error)
	// Status reports the latest resolution of the reference manifest at
	// path, which may be newer than the version serving.
	Status(path string) ResolveStatus
	// Loaded is called when the plugin res describes, of the reference
	// manifest at path, loaded and serves: it is now the last good version
	// of path, which Fallback returns. A version that resolved but did not
	// load (its config refused, its module failing) never becomes it.
	Loaded(path string, res Resolved)
	// Fallback returns the last good version of the reference manifest at
	// path — the last one that loaded — when it is still kept and is not
	// what path names now. The Manager loads it when the current version
	// fails to load and nothing serves from path (an agent restarted after
	// a change it refuses), so the node enforces what it enforced before.
	Fallback(ctx context.Context, path string) (Resolved, bool)
}

// fixed is a Resolver that answers every Resolve with one resolution: how
// the Manager loads a Fallback.
type fixed struct {
	Resolver
	res Resolved
}

// Resolve implements Resolver.
func (f fixed) Resolve(context.Context, string, abi.Manifest) (Resolved, error) { return f.res, nil }

// Resolved is a plugin a Resolver brought.
type Resolved struct {
	// Manifest is the effective manifest: the artifact's, with the
	// node's settings from the reference manifest; validated.
	Manifest abi.Manifest
	// WasmPath is the module's file (an absolute path); it is read at load and again when an
	// idle plugin's code is reloaded, and must keep Manifest.SHA256.
	WasmPath string
	// Stamp changes when the plugin does (the digest).
	Stamp string
	// Image is the reference manifest's image; Digest the artifact's
	// manifest digest it was resolved to.
	Image, Digest string
	// Verified: the artifact passed verification before it was kept.
	Verified bool
	// Ref is the reference manifest this was resolved from: the current
	// one, or the one of a last good version.
	Ref abi.Manifest
}

// ResolveStatus is a reference's latest resolution.
type ResolveStatus struct {
	// Image is the reference; Digest what it last resolved to.
	Image, Digest string
	// ResolvedAt is when it last resolved without error.
	ResolvedAt time.Time
	// Error is the last resolution's failure (resolve, pull, verify,
	// cache), empty when it succeeded; the serving version is unchanged
	// by a failure.
	Error string
}
