// Package pluginfetch brings the plugins that reference manifests name from
// an OCI registry: it resolves a reference to a digest, pulls the artifact
// (host/internal/pluginoci, with its size caps), has it verified (Verifier),
// keeps it in a cache by digest and turns it into the module and effective
// manifest the plugin host loads (pluginhost.Resolver). Tags are resolved
// again every ResolveInterval; a new digest is pulled and verified before
// the Manager is asked to load it, so the version enforced changes only for
// one that loaded, and an unreachable registry changes nothing enforced. A
// verified digest in the cache, and the digest a tag last resolved to, load
// without the registry.
package pluginfetch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// DefaultResolveInterval is how often tags are resolved again by default.
const DefaultResolveInterval = 5 * time.Minute

// DefaultTimeout bounds one resolution (resolve, pull, verify) by default.
const DefaultTimeout = time.Minute

// Reasons a fetch fails, the reason label of
// wasmlet_plugin_fetch_errors_total.
const (
	ReasonReference = "reference" // the image does not parse
	ReasonResolve   = "resolve"   // the tag could not be resolved
	ReasonPull      = "pull"      // the artifact could not be pulled or is not a plugin
	ReasonVerify    = "verify"    // verification refused it
	ReasonCache     = "cache"     // it could not be kept or read back
	ReasonGrant     = "grant"     // it asks for more than the grant, or its manifest is invalid here
)

// Config configures a Fetcher.
type Config struct {
	// Dir holds the cache (<root-dir>/plugins).
	Dir string
	// Client pulls from registries (credentials, CA, size caps).
	Client *pluginoci.Client
	// Verifier checks an artifact before it is kept; nil means NoPolicy.
	Verifier Verifier
	// PolicyFile is the node's verification policy
	// (--plugin-verification-policy), which the Verifier applies; its
	// content is part of what a kept artifact was verified against, so a
	// changed policy verifies again.
	PolicyFile string
	// ResolveInterval is how often tags are resolved again; default
	// DefaultResolveInterval.
	ResolveInterval time.Duration
	// Timeout bounds one resolution; default DefaultTimeout.
	Timeout time.Duration
	// Defaults are the host's values of unset permissions, against which
	// requests and grants are compared.
	Defaults Defaults
	// OnChange is called (never under a lock) when a reference resolved
	// to a new digest that is now kept verified: the Manager's Rescan.
	OnChange func()
	// Logger receives fetch logs.
	Logger hclog.Logger
	// Registerer, when set, receives wasmlet_plugin_fetch_errors_total.
	Registerer prometheus.Registerer
}

// Fetcher implements pluginhost.Resolver over OCI registries.
type Fetcher struct {
	cfg    Config
	cache  cache
	errors *prometheus.CounterVec

	fetchMu sync.Mutex // one network resolution at a time

	mu      sync.Mutex
	tags    map[string]string // reference key → digest, persisted
	watched map[string]abi.Manifest
	status  map[string]pluginhost.ResolveStatus // by manifest path
	good    map[string]lastGood                 // by manifest path, persisted
	kick    chan struct{}
}

var _ pluginhost.Resolver = (*Fetcher)(nil)

// New returns a Fetcher; it reads the remembered resolutions and removes
// what an interrupted write left in the cache.
func New(cfg Config) (*Fetcher, error) {
	if cfg.Dir == "" {
		return nil, errors.New("plugin fetch: Config.Dir is empty")
	}
	if cfg.Client == nil {
		return nil, errors.New("plugin fetch: Config.Client is nil")
	}
	if cfg.Verifier == nil {
		cfg.Verifier = NoPolicy{}
	}
	if cfg.ResolveInterval <= 0 {
		cfg.ResolveInterval = DefaultResolveInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Defaults.MemoryPages == 0 {
		cfg.Defaults.MemoryPages = pluginhost.DefaultMemoryPages
	}
	if cfg.Defaults.Timeout <= 0 {
		cfg.Defaults.Timeout = pluginhost.DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	f := &Fetcher{
		cfg:   cfg,
		cache: cache{dir: cfg.Dir},
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_plugin_fetch_errors_total",
			Help: "Failed resolutions of plugins in a registry, by plugin and reason (reference, resolve, pull, verify, cache, grant); the version enforced is unchanged by them.",
		}, []string{"plugin", "reason"}),
		watched: map[string]abi.Manifest{},
		status:  map[string]pluginhost.ResolveStatus{},
		kick:    make(chan struct{}, 1),
	}
	f.cache.clean()
	tags, err := f.cache.loadTags()
	if err != nil {
		cfg.Logger.Warn("plugin cache: remembered tags unreadable; tags are resolved afresh", "error", err)
	}
	f.tags = tags
	good, err := f.cache.loadLastGood()
	if err != nil {
		cfg.Logger.Warn("plugin cache: last good versions unreadable; a failing reference loads nothing at start", "error", err)
	}
	f.good = good
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(f.errors); err != nil {
			return nil, fmt.Errorf("plugin fetch: register metrics: %w", err)
		}
	}
	return f, nil
}

// fetchError is a failed resolution: its reason and what went wrong.
type fetchError struct {
	reason string
	err    error
}

func (e *fetchError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

func failed(reason string, err error) error { return &fetchError{reason: reason, err: err} }

// reference is a reference manifest's image, parsed, with what it must be
// verified against.
type reference struct {
	path string
	ref  abi.Manifest
	r    name.Reference
	req  string // requirement(ref.Verification)
	key  string // the tags map's key: the reference and its requirement
}

func (f *Fetcher) parse(path string, ref abi.Manifest) (reference, error) {
	r, err := pluginoci.ParseReference(ref.Image)
	if err != nil {
		return reference{}, failed(ReasonReference, err)
	}
	req := requirement(ref.Verification, filepath.Dir(path), f.cfg.PolicyFile)
	return reference{path: path, ref: ref, r: r, req: req, key: r.Name() + "#" + req}, nil
}

// known returns the digest the reference names or last resolved to, kept
// verified against its requirement; false when there is none.
func (f *Fetcher) known(rf reference) (v1.Hash, bool) {
	var s string
	if d, ok := rf.r.(name.Digest); ok {
		s = d.DigestStr()
	} else {
		f.mu.Lock()
		s = f.tags[rf.key]
		f.mu.Unlock()
	}
	h, err := v1.NewHash(s)
	if err != nil || !f.cache.verified(h, rf.req) {
		return v1.Hash{}, false
	}
	return h, true
}

// Stamps implements pluginhost.Resolver: the digest each reference holds
// verified, without the registry. The references given replace the ones
// watched; a new one is resolved at once by Run.
func (f *Fetcher) Stamps(refs map[string]abi.Manifest) map[string]string {
	out := map[string]string{}
	fresh := false
	for path, ref := range refs {
		rf, err := f.parse(path, ref)
		if err != nil {
			continue
		}
		if h, ok := f.known(rf); ok {
			out[path] = h.String()
		}
	}
	f.mu.Lock()
	for path, ref := range refs {
		if old, ok := f.watched[path]; !ok || old.Image != ref.Image {
			fresh = true
		}
	}
	for path := range f.status {
		if _, ok := refs[path]; !ok {
			delete(f.status, path)
		}
	}
	f.watched = refs
	f.mu.Unlock()
	f.forgetGood(refs)
	if fresh {
		f.poke()
	}
	return out
}

// Status implements pluginhost.Resolver.
func (f *Fetcher) Status(path string) pluginhost.ResolveStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status[path]
}

// Resolve implements pluginhost.Resolver: the kept verified digest the
// reference names or last resolved to, without the registry; else it is
// resolved, pulled, verified and kept first. When that fails, the last
// good version of the reference manifest at path (the last that loaded,
// with the reference manifest of then), if it is still kept verified, is
// returned instead — the failure recorded all the same — so an agent
// restarted while its reference cannot be resolved enforces what it
// enforced before.
func (f *Fetcher) Resolve(ctx context.Context, path string, ref abi.Manifest) (pluginhost.Resolved, error) {
	res, err := f.resolveCurrent(ctx, path, ref)
	if err == nil {
		return res, nil
	}
	old, ok := f.lastGoodOf(path, ref)
	if !ok {
		return pluginhost.Resolved{}, err
	}
	f.cfg.Logger.Warn("plugin kept at its last good version", "plugin", ref.Name, "file", path,
		"image", old.Image, "digest", old.Digest, "failed_image", ref.Image)
	return old, nil
}

// resolveCurrent is Resolve of ref itself.
func (f *Fetcher) resolveCurrent(ctx context.Context, path string, ref abi.Manifest) (pluginhost.Resolved, error) {
	rf, err := f.parse(path, ref)
	if err != nil {
		return pluginhost.Resolved{}, f.report(rf, path, ref, err)
	}
	h, ok := f.known(rf)
	if !ok {
		if h, _, err = f.fetch(ctx, rf, false); err != nil {
			return pluginhost.Resolved{}, f.report(rf, path, ref, err)
		}
	}
	res, err := f.resolved(rf, h)
	if err != nil {
		return pluginhost.Resolved{}, f.report(rf, path, ref, err)
	}
	return res, nil
}

// resolved reads a kept digest and merges its manifest with the node's.
func (f *Fetcher) resolved(rf reference, h v1.Hash) (pluginhost.Resolved, error) {
	b, module, err := f.cache.read(h, rf.req)
	if err != nil {
		return pluginhost.Resolved{}, failed(ReasonCache, err)
	}
	var art abi.Manifest
	if err := yaml.UnmarshalStrict(b, &art); err != nil {
		return pluginhost.Resolved{}, failed(ReasonGrant, fmt.Errorf("the artifact's manifest: %v", err))
	}
	if err := art.Validate(); err != nil {
		return pluginhost.Resolved{}, failed(ReasonGrant, fmt.Errorf("the artifact's manifest: %v", err))
	}
	eff, err := effective(rf.ref, art, f.cfg.Defaults)
	if err != nil {
		return pluginhost.Resolved{}, failed(ReasonGrant, err)
	}
	return pluginhost.Resolved{
		Manifest: eff, WasmPath: module, Stamp: h.String(),
		Image: rf.ref.Image, Digest: h.String(), Verified: true, Ref: rf.ref,
	}, nil
}

// fetch resolves rf to a digest and, unless that digest is kept verified,
// pulls, verifies and keeps it; then it remembers what a tag resolved to.
// It reports whether the reference now names another digest than before.
// A tag resolved before is resolved by a HEAD request alone; the first
// resolution of a tag reads its manifest by the same GET the pull needs,
// the digest being that of the bytes read. With unresolved, a reference
// already resolved since it was watched is left as it is (the round a new
// reference asks for need not resolve again what Resolve just fetched).
func (f *Fetcher) fetch(ctx context.Context, rf reference, unresolved bool) (v1.Hash, bool, error) {
	f.fetchMu.Lock()
	defer f.fetchMu.Unlock()
	if unresolved {
		if h, ok := f.resolvedSinceWatched(rf); ok {
			return h, false, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	var (
		h v1.Hash
		m *pluginoci.Manifest
	)
	if d, ok := rf.r.(name.Digest); ok {
		var err error
		if h, err = v1.NewHash(d.DigestStr()); err != nil {
			return h, false, failed(ReasonReference, err)
		}
	} else {
		f.mu.Lock()
		_, before := f.tags[rf.key]
		f.mu.Unlock()
		var err error
		if before {
			h, err = f.cfg.Client.Resolve(ctx, rf.ref.Image)
		} else if m, err = f.cfg.Client.Manifest(ctx, rf.ref.Image); err == nil {
			h = m.Digest
		}
		if err != nil {
			return h, false, failed(ReasonResolve, err)
		}
	}
	if !f.cache.verified(h, rf.req) {
		at := rf.r.Context().Digest(h.String())
		if m == nil {
			var err error
			if m, err = f.cfg.Client.Manifest(ctx, at.String()); err != nil {
				return h, false, failed(ReasonPull, err)
			}
		}
		if m.Digest != h {
			return h, false, failed(ReasonPull, fmt.Errorf("%s answered with manifest %s", at, m.Digest))
		}
		p, err := f.cfg.Client.Blobs(ctx, m)
		if err != nil {
			return h, false, failed(ReasonPull, err)
		}
		// The signatures checked are those of h, the digest of the
		// manifest whose blobs were read and are kept.
		if err := f.cfg.Verifier.Verify(ctx, at, rf.ref.Verification, filepath.Dir(rf.path)); err != nil {
			return h, false, failed(ReasonVerify, err)
		}
		// The artifact's manifest is checked against the grant before it
		// is kept, so a refusal is reported here, not only at load.
		var art abi.Manifest
		if err := yaml.UnmarshalStrict(p.Manifest.Data, &art); err != nil {
			return h, false, failed(ReasonGrant, fmt.Errorf("the artifact's manifest: %v", err))
		}
		if err := art.Validate(); err != nil {
			return h, false, failed(ReasonGrant, fmt.Errorf("the artifact's manifest: %v", err))
		}
		if _, err := effective(rf.ref, art, f.cfg.Defaults); err != nil {
			return h, false, failed(ReasonGrant, err)
		}
		m := marker{Image: rf.ref.Image, Digest: h.String(), VerifiedAt: time.Now().UTC()}
		if err := f.cache.store(h, p.Module.Data, p.Manifest.Data, rf.req, m); err != nil {
			return h, false, failed(ReasonCache, err)
		}
		f.cfg.Logger.Info("plugin pulled and verified", "plugin", rf.ref.Name, "image", rf.ref.Image, "digest", h.String(),
			"version", art.Version, "cache", f.cache.artifactDir(h))
	}
	moved := false
	if _, isDigest := rf.r.(name.Digest); !isDigest {
		f.mu.Lock()
		moved = f.tags[rf.key] != h.String()
		var tags map[string]string
		if moved {
			f.tags[rf.key] = h.String()
			tags = make(map[string]string, len(f.tags))
			for k, v := range f.tags {
				tags[k] = v
			}
		}
		f.mu.Unlock()
		if moved {
			if err := f.cache.saveTags(tags); err != nil {
				f.cfg.Logger.Warn("plugin cache: cannot remember the tag; a restart needs the registry", "image", rf.ref.Image, "error", err)
			}
		}
	}
	f.ok(rf, h)
	return h, moved, nil
}

// resolvedSinceWatched returns the digest rf resolved to, kept verified,
// when it was resolved successfully since it was watched at its path with
// its image (a status without error).
func (f *Fetcher) resolvedSinceWatched(rf reference) (v1.Hash, bool) {
	f.mu.Lock()
	st, ok := f.status[rf.path]
	f.mu.Unlock()
	if !ok || st.Error != "" || st.Image != rf.ref.Image || st.Digest == "" {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(st.Digest)
	if err != nil || !f.cache.verified(h, rf.req) {
		return v1.Hash{}, false
	}
	return h, true
}

// ok records a successful resolution of rf.
func (f *Fetcher) ok(rf reference, h v1.Hash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[rf.path] = pluginhost.ResolveStatus{Image: rf.ref.Image, Digest: h.String(), ResolvedAt: time.Now()}
}

// report records and logs a failed resolution and returns the error naming
// the plugin, the manifest, the reference and the reason.
func (f *Fetcher) report(rf reference, path string, ref abi.Manifest, err error) error {
	reason := ReasonCache
	var fe *fetchError
	if errors.As(err, &fe) {
		reason = fe.reason
	}
	err = fmt.Errorf("plugin %q (%s): image %s: %w", ref.Name, path, ref.Image, err)
	f.errors.WithLabelValues(ref.Name, reason).Inc()
	f.mu.Lock()
	st := f.status[path]
	st.Image, st.Error = ref.Image, err.Error()
	f.status[path] = st
	f.mu.Unlock()
	f.cfg.Logger.Warn("plugin fetch failed; the version enforced is unchanged", "plugin", ref.Name, "file", path,
		"image", ref.Image, "reason", reason, "error", err)
	return err
}

// poke asks Run for a resolution round now.
func (f *Fetcher) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Run resolves the watched references every ResolveInterval (and when new
// ones appear) until ctx is done: a reference that names another digest
// than before, or one whose plugin is not kept yet, is pulled, verified and
// kept, and then OnChange is called. Failures are recorded (Status, log,
// metric) and change nothing enforced. The round new references ask for
// resolves only those not resolved since they were watched.
func (f *Fetcher) Run(ctx context.Context) error {
	t := time.NewTicker(f.cfg.ResolveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			f.ResolveAll(ctx)
		case <-f.kick:
			f.resolveRound(ctx, true)
		}
	}
}

// ResolveAll resolves every watched reference once (what Run does each
// interval) and calls OnChange when one moved.
func (f *Fetcher) ResolveAll(ctx context.Context) {
	f.resolveRound(ctx, false)
}

// resolveRound resolves the watched references — with unresolved, only
// those not resolved since they were watched — and calls OnChange when one
// moved or was fetched for the first time.
func (f *Fetcher) resolveRound(ctx context.Context, unresolved bool) {
	f.mu.Lock()
	paths := make([]string, 0, len(f.watched))
	refs := map[string]abi.Manifest{}
	for p, r := range f.watched {
		paths = append(paths, p)
		refs[p] = r
	}
	f.mu.Unlock()
	sort.Strings(paths)
	changed := false
	for _, path := range paths {
		if ctx.Err() != nil {
			return
		}
		ref := refs[path]
		rf, err := f.parse(path, ref)
		if err != nil {
			f.report(rf, path, ref, err)
			continue
		}
		_, wasKnown := f.known(rf)
		_, moved, err := f.fetch(ctx, rf, unresolved)
		if err != nil {
			f.report(rf, path, ref, err)
			continue
		}
		if moved || !wasKnown {
			changed = true
		}
	}
	if changed && f.cfg.OnChange != nil {
		f.cfg.OnChange()
	}
}
