package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
)

// State is a plugin file's state in a Manager.
type State string

const (
	// StateLoaded: the plugin serves calls (Error may still report a refused
	// replacement; the previous version keeps serving).
	StateLoaded State = "loaded"
	// StateFailed: the file never loaded; Error says why.
	StateFailed State = "failed"
)

// Info describes one plugin file of a Manager's directory.
type Info struct {
	// Path is the manifest, or the bare .wasm.
	Path string
	// State is loaded or failed.
	State State
	// Error is the last load error for this file (a refused replacement when
	// State is loaded), empty when the last load succeeded.
	Error string
	// Name, Version, ABI, Kinds, Order, FailurePolicy and Mode come from
	// the serving plugin's effective manifest (empty when failed).
	Name          string
	Version       string
	ABI           abi.Version
	Kinds         []abi.Kind
	Order         int
	FailurePolicy abi.FailurePolicy
	Mode          abi.Mode
	// SHA256 of the serving module.
	SHA256 string
	// Image is the reference of a reference manifest (image: set), empty
	// for a plugin whose module is in the directory; Digest and Verified
	// are the serving version's artifact digest and whether it passed
	// verification; ResolvedDigest is the digest the reference last
	// resolved to (newer than Digest while a new version is refused);
	// ResolveError is the last resolution's failure, which changes nothing
	// serving.
	Image, Digest, ResolvedDigest string
	Verified                      bool
	ResolveError                  string
	// Deadline is the deadline mechanism in force.
	Deadline DeadlineMode
	// LoadedAt is when the serving version was loaded.
	LoadedAt time.Time
	// Stats are the serving version's call figures.
	Stats Stats
}

// Manager keeps every plugin of a directory loaded, sharing one wazero
// runtime and compilation cache, and reloads them when files change.
type Manager struct {
	cfg Config
	e   *engine
	// loaders bounds the files a scan loads at once: GOMAXPROCS, as
	// compiling a module with a cold cache is seconds of one core's work.
	loaders int

	mu      sync.RWMutex
	entries map[string]*entry // by Path
	refs    map[string]bool   // the reference manifests of the last scan
	scanMu  sync.Mutex
	onScan  []func()
	rescan  chan struct{} // Rescan's signal to Run
}

type entry struct {
	path     string
	plugin   *Plugin
	loadedAt time.Time
	err      error
	stamp    string // files' size+mtime of the last attempt
	name     string // the plugin name, when refused for errNameUsed
}

// NewManager creates a Manager for cfg.Dir; nothing is loaded until Scan or
// Run.
func NewManager(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("plugin manager: Config.Dir is empty")
	}
	e, err := newEngine(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, e: e, loaders: runtime.GOMAXPROCS(0), entries: map[string]*entry{}, rescan: make(chan struct{}, 1)}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(&collector{m: m}); err != nil {
			return nil, fmt.Errorf("plugin manager: register metrics: %w", err)
		}
	}
	return m, nil
}

// OnChange registers f to run after every scan that added, replaced or
// removed a serving plugin (so callers can refresh their per-kind lists).
func (m *Manager) OnChange(f func()) {
	m.scanMu.Lock()
	m.onScan = append(m.onScan, f)
	m.scanMu.Unlock()
}

// Run scans the directory, then watches it (fsnotify, plus a rescan every
// Config.Rescan) until ctx is done, and closes every plugin.
func (m *Manager) Run(ctx context.Context) error {
	// Watch before the first scan, so no change falls between the two.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		m.cfg.Logger.Warn("plugin dir: fsnotify unavailable, periodic rescan only", "dir", m.cfg.Dir, "error", err)
	} else {
		defer w.Close()
		if err := w.Add(m.cfg.Dir); err != nil {
			m.cfg.Logger.Warn("plugin dir: cannot watch, periodic rescan only", "dir", m.cfg.Dir, "error", err)
		}
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		if m.cfg.LowerDir != "" {
			if err := w.Add(m.cfg.LowerDir); err != nil {
				m.cfg.Logger.Warn("plugin dir: cannot watch, periodic rescan only", "dir", m.cfg.LowerDir, "error", err)
			}
		}
		events, errs = w.Events, w.Errors
	}
	m.Scan(ctx)
	tick := time.NewTicker(m.cfg.Rescan)
	defer tick.Stop()
	// Debounce: writers (cp, editors) produce bursts; scan once they settle.
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			m.Close(context.Background())
			return nil
		case <-tick.C:
			m.Scan(ctx)
		case <-events:
			debounce.Reset(100 * time.Millisecond)
		case <-debounce.C:
			m.Scan(ctx)
		case <-m.rescan:
			m.Scan(ctx)
		case err := <-errs:
			m.cfg.Logger.Warn("plugin dir: watch error", "dir", m.cfg.Dir, "error", err)
		}
	}
}

// Rescan asks Run to scan the directory soon (a Resolver holds a new
// version of a reference); it never blocks.
func (m *Manager) Rescan() {
	select {
	case m.rescan <- struct{}{}:
	default:
	}
}

// Close closes every plugin and the runtime.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	for k, e := range m.entries {
		if e.plugin != nil {
			e.plugin.Close(ctx)
		}
		delete(m.entries, k)
	}
	m.mu.Unlock()
	m.e.close(ctx)
}

// Scan brings the loaded set in line with the directory once: new files
// load, changed files reload (a failing new version is refused and the
// previous one keeps serving), removed files unload. Files load
// GOMAXPROCS at a time. Errors are logged naming the file and kept in
// Plugins().
func (m *Manager) Scan(ctx context.Context) {
	m.scanMu.Lock()
	defer m.scanMu.Unlock()
	found, refs, err := discover(m.cfg.Dir)
	if err != nil {
		m.cfg.Logger.Error("plugin dir: cannot read", "dir", m.cfg.Dir, "error", err)
		return
	}
	if m.cfg.LowerDir != "" {
		lfound, lrefs, err := discover(m.cfg.LowerDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			m.cfg.Logger.Error("plugin dir: cannot read", "dir", m.cfg.LowerDir, "error", err)
			return
		}
		for k, v := range lfound {
			found[k] = v
		}
		for k, v := range lrefs {
			refs[k] = v
		}
	}
	// A reference manifest's stamp covers the plugin it resolves to, so
	// a moved tag reloads it like a changed file.
	var refStamps map[string]string
	if m.cfg.Resolver != nil {
		refStamps = m.cfg.Resolver.Stamps(refs)
	}
	isRef := map[string]bool{}
	for path := range refs {
		found[path] = withRefStamp(found[path], refStamps[path])
		isRef[path] = true
	}
	m.mu.Lock()
	m.refs = isRef
	m.mu.Unlock()
	changed := false
	// Removed files first, so a plugin renamed to a new file frees its name.
	m.mu.Lock()
	for path, e := range m.entries {
		if _, ok := found[path]; ok {
			continue
		}
		delete(m.entries, path)
		if e.plugin != nil {
			m.cfg.Logger.Info("plugin removed", "file", path, "plugin", e.plugin.Name())
			e.plugin.Close(ctx)
			changed = true
		}
	}
	m.mu.Unlock()
	paths := make([]string, 0, len(found))
	for p := range found {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool {
		if li, lj := m.lower(paths[i]), m.lower(paths[j]); li != lj {
			return lj
		}
		return paths[i] < paths[j]
	})
	// The files load in parallel and are installed in path order (Dir's
	// before LowerDir's), as if they had loaded one after another: of two
	// new files naming the same plugin, the first serves.
	for _, a := range m.loadAll(ctx, paths, found) {
		if m.install(ctx, a) {
			changed = true
		}
	}
	// A file refused because another held its name is tried again once
	// that name is free (its owner deleted, renamed or now another
	// plugin), though the file itself did not change: adding v2 beside v1
	// and then deleting v1 — an upgrade — must end with v2 serving, never
	// with no plugin of that name.
	for _, path := range paths {
		m.mu.RLock()
		e := m.entries[path]
		retry := e != nil && e.plugin == nil && errors.Is(e.err, errNameUsed) && m.byNameLocked(e.name, path) == ""
		m.mu.RUnlock()
		if retry && m.scanOne(ctx, path, "") {
			changed = true
		}
	}
	if changed {
		m.cfg.Logger.Info("plugin set changed; enforced now", "plugins", m.Enforced())
		for _, f := range m.onScan {
			f()
		}
	}
}

// errNameUsed marks a load refused because another file serves the name.
var errNameUsed = errors.New("name already used")

// Enforced describes the serving plugins, one "name@version(kinds, policy)
// from file" per plugin sorted by name — what the agent enforces now; a
// plugin in monitor mode says so after its policy ("…, mode monitor").
func (m *Manager) Enforced() string {
	var out []string
	for _, in := range m.Plugins() {
		if in.State == StateLoaded {
			mode := ""
			if in.Mode == abi.ModeMonitor {
				mode = ", mode monitor"
			}
			out = append(out, fmt.Sprintf("%s@%s(%v, failurePolicy %s%s) from %s", in.Name, in.Version, in.Kinds, in.FailurePolicy, mode, filepath.Base(in.Path)))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// scanOne (re)loads one file when its stamp changed (an empty stamp: load
// again whatever the stamp); it reports whether the serving plugin changed.
func (m *Manager) scanOne(ctx context.Context, path, stamp string) bool {
	return m.install(ctx, m.load(ctx, path, stamp))
}

// attempt is one file's load in a scan, not yet installed.
type attempt struct {
	path, stamp string
	unchanged   bool // the stamp is the last attempt's: nothing was loaded
	p           *Plugin
	err         error
	// refused is the current version's load error when p is the last
	// good version loaded in its stead (fallback).
	refused error
}

// load loads path when its stamp changed (an empty stamp: whatever the
// stamp). Errors name the file.
func (m *Manager) load(ctx context.Context, path, stamp string) attempt {
	m.mu.RLock()
	old := m.entries[path]
	m.mu.RUnlock()
	if stamp == "" && old != nil {
		stamp = old.stamp
	} else if old != nil && old.stamp == stamp {
		return attempt{path: path, stamp: stamp, unchanged: true}
	}
	a := attempt{path: path, stamp: stamp}
	if strings.HasSuffix(path, abi.ManifestSuffix) {
		a.p, a.err = m.e.load(ctx, path, nil, m.cfg.Resolver)
		if a.err == nil && a.p.src.resolved != nil {
			// The stamp of what was loaded, which may be newer than the
			// scan's (the first resolution happens in the load).
			a.stamp = withRefStamp(a.stamp, a.p.src.resolved.Stamp)
		}
		if a.err != nil && (old == nil || old.plugin == nil) {
			m.fallback(ctx, &a)
		}
	} else {
		a.err = errNoManifest(path)
	}
	return a
}

// fallback loads the last good version of a reference manifest whose
// current version failed to load while nothing serves from its file (the
// agent restarted after a change it refuses): that version serves, and the
// failure stays the file's error. The attempt keeps the failed version's
// stamp, so a rescan tries it again only once something changed.
func (m *Manager) fallback(ctx context.Context, a *attempt) {
	m.mu.RLock()
	ref := m.refs[a.path]
	m.mu.RUnlock()
	if !ref || m.cfg.Resolver == nil {
		return
	}
	res, ok := m.cfg.Resolver.Fallback(ctx, a.path)
	if !ok {
		return
	}
	p, err := m.e.load(ctx, a.path, nil, fixed{Resolver: m.cfg.Resolver, res: res})
	if err != nil {
		m.cfg.Logger.Error("plugin's last good version failed to load too", "file", a.path,
			"image", res.Image, "digest", res.Digest, "error", err)
		return
	}
	a.p, a.refused, a.err = p, a.err, nil
}

// loadAll loads paths (their stamps in stamps), at most m.loaders at once;
// the attempts are in the order of paths. A file that fails does not stop
// the others.
func (m *Manager) loadAll(ctx context.Context, paths []string, stamps map[string]string) []attempt {
	out := make([]attempt, len(paths))
	busy := make(chan struct{}, max(m.loaders, 1))
	var wg sync.WaitGroup
	for i, path := range paths {
		busy <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-busy }()
			out[i] = m.load(ctx, path, stamps[path])
		}()
	}
	wg.Wait()
	return out
}

// install makes a loaded file's plugin serve, or records why it does not
// (its load failed, or another file serves its name); it reports whether
// the serving plugin changed.
func (m *Manager) install(ctx context.Context, a attempt) bool {
	if a.unchanged {
		return false
	}
	path, p, err := a.path, a.p, a.err
	var name string // the plugin name refused for being in use
	if err == nil {
		if other := m.byName(p.Name(), path); other != "" && m.lower(other) && !m.lower(path) {
			m.displace(other, path, p.Name())
		} else if other != "" {
			p.Close(ctx)
			name = p.Name()
			err = fmt.Errorf("plugin %q: %w by %s", p.Name(), errNameUsed, other)
		}
	}
	if err == nil && p.src.resolved != nil && m.cfg.Resolver != nil {
		m.cfg.Resolver.Loaded(path, *p.src.resolved)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[path]
	if e == nil {
		e = &entry{path: path}
		m.entries[path] = e
	}
	e.stamp = a.stamp
	e.name = name
	if err != nil {
		e.err = err
		if e.plugin != nil {
			m.cfg.Logger.Error("plugin replacement refused, previous version keeps serving", "file", path,
				"plugin", e.plugin.Name(), "serving_version", e.plugin.Manifest().Version, "error", err)
		} else {
			m.cfg.Logger.Error("plugin failed to load", "file", path, "error", err)
		}
		return false
	}
	prev := e.plugin
	e.plugin, e.err, e.loadedAt = p, a.refused, time.Now()
	if prev != nil && prev.Name() == p.Name() && prev.Manifest().Version == p.Manifest().Version {
		// The same version again (a re-copied file, another build under
		// the same version): its figures go on rather than restart.
		p.stats.add(prev.Stats())
	}
	var from []any // where a reference manifest's plugin came from
	if r := p.src.resolved; r != nil {
		from = []any{"image", r.Image, "digest", r.Digest, "verified", r.Verified}
	}
	if a.refused != nil {
		m.cfg.Logger.Error("plugin failed to load; its last good version serves", append([]any{"file", path, "plugin", p.Name(),
			"version", p.Manifest().Version, "error", a.refused}, from...)...)
	}
	if prev != nil {
		m.cfg.Logger.Info("plugin replaced", append([]any{"file", path, "plugin", p.Name(), "version", p.Manifest().Version,
			"previous_version", prev.Manifest().Version, "sha256", p.SHA256()}, from...)...)
		go prev.Close(context.Background()) // in-flight calls finish on their instances
	} else {
		m.cfg.Logger.Info("plugin loaded", append([]any{"file", path, "plugin", p.Name(), "version", p.Manifest().Version,
			"kinds", fmt.Sprint(p.Manifest().Kinds), "deadline", string(p.DeadlineMode())}, from...)...)
	}
	return true
}

// lower reports whether path is a file of Config.LowerDir.
func (m *Manager) lower(path string) bool {
	return m.cfg.LowerDir != "" && filepath.Dir(path) == filepath.Clean(m.cfg.LowerDir)
}

// displace unloads the LowerDir file other, serving plugin name, for path
// of Dir: other is refused as if it had lost the name to path, and is
// tried again once path no longer serves it.
func (m *Manager) displace(other, path, name string) {
	m.mu.Lock()
	e := m.entries[other]
	var p *Plugin
	if e != nil {
		p, e.plugin, e.name = e.plugin, nil, name
		e.err = fmt.Errorf("plugin %q: %w by %s", name, errNameUsed, path)
	}
	m.mu.Unlock()
	if p != nil {
		m.cfg.Logger.Info("plugin displaced by the plugin directory's", "file", other, "plugin", name, "by", path)
		go p.Close(context.Background()) // in-flight calls finish on their instances
	}
}

// byName returns the path of another file serving plugin name, if any.
func (m *Manager) byName(name, except string) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byNameLocked(name, except)
}

// byNameLocked is byName with m.mu held.
func (m *Manager) byNameLocked(name, except string) string {
	for path, e := range m.entries {
		if path != except && e.plugin != nil && e.plugin.Name() == name {
			return path
		}
	}
	return ""
}

// refStampSep separates a reference manifest's file stamp from the stamp of
// the plugin it resolves to.
const refStampSep = "|ref "

// withRefStamp replaces the resolved part of a reference manifest's stamp.
func withRefStamp(stamp, resolved string) string {
	if i := strings.Index(stamp, refStampSep); i >= 0 {
		stamp = stamp[:i]
	}
	return stamp + refStampSep + resolved
}

// discover lists the plugin files of dir with their stamps: every manifest,
// and every .wasm that no manifest claims (by its wasm field or by the
// <stem>.plugin.yaml convention), which scanOne reports as failed. A
// manifest's stamp covers its module too. The valid reference manifests
// (image set) are returned parsed as well; an invalid one is reported by
// its load.
func discover(dir string) (map[string]string, map[string]abi.Manifest, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]string{}
	refs := map[string]abi.Manifest{}
	claimed := map[string]bool{}
	var wasms []string
	for _, de := range ents {
		name := de.Name()
		full := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, "."):
		case strings.HasSuffix(name, abi.ManifestSuffix):
			wasm := strings.TrimSuffix(name, abi.ManifestSuffix) + ".wasm"
			if b, err := os.ReadFile(full); err == nil {
				var mf struct {
					Wasm  string `json:"wasm"`
					Image string `json:"image"`
				}
				if yaml.Unmarshal(b, &mf) == nil && mf.Wasm != "" {
					wasm = mf.Wasm
				}
				var ref abi.Manifest
				if mf.Image != "" && yaml.UnmarshalStrict(b, &ref) == nil && ref.Validate() == nil {
					refs[full] = ref
				}
			}
			if !filepath.IsAbs(wasm) {
				wasm = filepath.Join(dir, wasm)
			}
			claimed[filepath.Clean(wasm)] = true
			claimed[filepath.Join(dir, strings.TrimSuffix(name, abi.ManifestSuffix)+".wasm")] = true
			out[full] = stamp(full) + "|" + stamp(wasm)
		case strings.HasSuffix(name, ".wasm"):
			wasms = append(wasms, full)
		}
	}
	for _, w := range wasms {
		if !claimed[w] {
			out[w] = stamp(w)
		}
	}
	return out, refs, nil
}

// errNoManifest refuses a module without a manifest in a plugin directory:
// a daemon only runs plugins whose sha256 someone pinned.
func errNoManifest(path string) error {
	stem := strings.TrimSuffix(filepath.Base(path), ".wasm")
	return fmt.Errorf("%s: %w: no manifest; a plugin directory needs %s%s beside each module",
		path, ErrManifest, stem, abi.ManifestSuffix)
}

func stamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d@%d", fi.Size(), fi.ModTime().UnixNano())
}

// Plugins returns a snapshot of every plugin file, sorted by path.
func (m *Manager) Plugins() []Info {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Info, 0, len(m.entries))
	for _, e := range m.entries {
		in := Info{Path: e.path, State: StateFailed}
		if e.err != nil {
			in.Error = e.err.Error()
		}
		if p := e.plugin; p != nil {
			mf := p.Manifest()
			in.State, in.Name, in.Version, in.ABI, in.Kinds = StateLoaded, mf.Name, mf.Version, mf.ABI, mf.Kinds
			in.Order, in.FailurePolicy, in.Mode, in.SHA256, in.Deadline = mf.Order, mf.FailurePolicy, mf.Mode, p.SHA256(), p.DeadlineMode()
			in.LoadedAt, in.Stats = e.loadedAt, p.Stats()
			if r := p.src.resolved; r != nil {
				in.Image, in.Digest, in.Verified = r.Image, r.Digest, r.Verified
			}
		}
		if m.refs[e.path] && m.cfg.Resolver != nil {
			st := m.cfg.Resolver.Status(e.path)
			in.Image, in.ResolvedDigest, in.ResolveError = st.Image, st.Digest, st.Error
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Get returns the serving plugin named name, or nil.
func (m *Manager) Get(name string) *Plugin {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, e := range m.entries {
		if e.plugin != nil && e.plugin.Name() == name {
			return e.plugin
		}
	}
	return nil
}

// OfKind returns the serving plugins of kind k, by manifest Order then name.
// A returned plugin may be closed by a later reload; its calls then fail
// with ErrClosed, and the caller should ask again.
func (m *Manager) OfKind(k abi.Kind) []*Plugin {
	m.mu.RLock()
	var out []*Plugin
	for _, e := range m.entries {
		if e.plugin == nil {
			continue
		}
		if mf := e.plugin.Manifest(); mf.HasKind(k) {
			out = append(out, e.plugin)
		}
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Manifest(), out[j].Manifest()
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return a.Name < b.Name
	})
	return out
}

// Admitters returns the admission plugins in order.
func (m *Manager) Admitters() []*Plugin { return m.OfKind(abi.KindAdmission) }

// Sources returns the source plugins in order.
func (m *Manager) Sources() []*Plugin { return m.OfKind(abi.KindSource) }

// Hooks returns the hook plugins in order.
func (m *Manager) Hooks() []*Plugin { return m.OfKind(abi.KindHook) }
