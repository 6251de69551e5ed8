package pluginapi

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/regularfile"
)

// trustedRootSuffix names the file beside a manifest that holds its
// WasmletPlugin's inline trusted root.
const trustedRootSuffix = ".trusted_root.json"

// refManifest is the reference manifest written for a WasmletPlugin: the
// fields of abi.Manifest that a reference manifest takes, in that order.
type refManifest struct {
	Name          string            `json:"name"`
	Image         string            `json:"image"`
	Verification  *abi.Verification `json:"verification,omitempty"`
	Config        map[string]string `json:"config,omitempty"`
	Mode          abi.Mode          `json:"mode,omitempty"`
	FailurePolicy abi.FailurePolicy `json:"failurePolicy,omitempty"`
	Order         int               `json:"order,omitempty"`
	Permissions   *abi.Permissions  `json:"permissions,omitempty"`
}

// render is the files of p's reference manifest in the managed directory,
// by file name, checked as the Manager will read them. Errors name the
// WasmletPlugin.
func render(p *pluginsv1.WasmletPlugin) (map[string][]byte, error) {
	fail := func(err error) (map[string][]byte, error) {
		return nil, fmt.Errorf("WasmletPlugin %s: %w", p.Name, err)
	}
	s := p.Spec
	m := refManifest{Name: p.Name, Image: s.Image, Config: s.Config, Mode: s.Mode, FailurePolicy: s.FailurePolicy, Order: s.Order}
	if perms := s.Permissions; len(perms.AllowedHosts) > 0 || perms.MemoryPages > 0 || perms.Timeout.Duration != 0 ||
		len(perms.Adjust) > 0 || len(perms.HostPaths) > 0 {
		perms := s.Permissions
		m.Permissions = &perms
	}
	files := map[string][]byte{}
	if v := s.Verification; v != nil {
		m.Verification = &abi.Verification{Keys: v.Keys, Keyless: v.Keyless}
		if v.TrustedRoot != "" {
			name := p.Name + trustedRootSuffix
			m.Verification.TrustedRoot = name
			files[name] = []byte(v.TrustedRoot)
		}
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return fail(err)
	}
	var check abi.Manifest
	if err := yaml.UnmarshalStrict(b, &check); err != nil {
		return fail(err)
	}
	if err := check.Validate(); err != nil {
		return fail(fmt.Errorf("spec: %w", err))
	}
	head := fmt.Sprintf("# Written by wasmlet from WasmletPlugin %s (generation %d); rewritten and removed as it changes.\n", p.Name, p.Generation)
	files[p.Name+abi.ManifestSuffix] = append([]byte(head), b...)
	return files, nil
}

// differs reports whether any of files is not in the managed directory
// with that content.
func (f *Follower) differs(files map[string][]byte) bool {
	for name, b := range files {
		old, err := os.ReadFile(filepath.Join(f.cfg.Dir, name))
		if err != nil || !bytes.Equal(old, b) {
			return true
		}
	}
	return false
}

// generationRE finds the generation in a written manifest's first line.
var generationRE = regexp.MustCompile(`^# Written by wasmlet from WasmletPlugin \S+ \(generation (\d+)\)`)

// generation is the WasmletPlugin generation the manifest of name in dir
// was written from; 0 when unknown.
func generation(dir, name string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, name+abi.ManifestSuffix))
	if err != nil {
		return 0
	}
	m := generationRE.FindSubmatch(b)
	if m == nil {
		return 0
	}
	g, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return g
}

// materialize writes the manifests of the plugins that select the node
// (l its labels) and removes every other file of the directory; a plugin
// refused here (a selector or spec the node cannot use), and one whose
// change waits for the node's turn in its rollout spread, keeps the files
// it had. It reports whether the directory changed.
func (f *Follower) materialize(plugins []pluginsv1.WasmletPlugin, l map[string]string) bool {
	want := map[string][]byte{}
	keep := map[string]bool{}
	refused := map[string]string{}
	waiting := map[string]time.Time{}
	now := f.cfg.Now()
	for i := range plugins {
		p := &plugins[i]
		files, spread, err := func() (map[string][]byte, time.Duration, error) {
			ok, err := Selects(p, l)
			if err != nil || !ok {
				return nil, 0, err
			}
			spread, err := spreadOf(p)
			if err != nil {
				return nil, 0, err
			}
			files, err := render(p)
			return files, spread, err
		}()
		if err != nil {
			refused[p.Name] = err.Error()
			keep[p.Name+abi.ManifestSuffix], keep[p.Name+trustedRootSuffix] = true, true
			continue
		}
		// A spread paces only a change seen while running: not the first
		// pass after start, and never a plugin whose files are on disk
		// already (read here only when a spread asks).
		if files != nil && spread > 0 && f.looked && f.differs(files) {
			if due, ok := f.turn(p.Name, spread, now); !ok {
				// Not this node's turn yet: what it enforces stays.
				waiting[p.Name] = due
				keep[p.Name+abi.ManifestSuffix], keep[p.Name+trustedRootSuffix] = true, true
				continue
			}
		}
		for name, b := range files {
			want[name] = b
		}
	}
	for name := range f.pending {
		if _, ok := waiting[name]; !ok {
			delete(f.pending, name)
		}
	}
	f.looked = true
	f.wakeAt(waiting)
	f.mu.Lock()
	for name, why := range refused {
		if f.refused[name] != why {
			f.cfg.Logger.Error("WasmletPlugin refused on this node; its previous manifest (if any) stays", "wasmletplugin", name, "error", why)
		}
	}
	for name, due := range waiting {
		if !f.waiting[name].Equal(due) {
			f.cfg.Logger.Info("WasmletPlugin change waits for this node's turn in its rollout spread; the previous manifest (if any) stays",
				"wasmletplugin", name, "until", due.Format(time.RFC3339))
		}
	}
	f.refused, f.waiting = refused, waiting
	f.mu.Unlock()
	changed := false
	// Trusted roots before manifests (file names sort them so), so a
	// manifest never names a file not yet written.
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := strings.HasSuffix(names[i], trustedRootSuffix), strings.HasSuffix(names[j], trustedRootSuffix)
		if ri != rj {
			return ri
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		path := filepath.Join(f.cfg.Dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, want[name]) {
			continue
		}
		if err := regularfile.WriteAtomic(path, want[name]); err != nil {
			f.cfg.Logger.Error("cannot write a plugin manifest", "file", path, "error", err)
			continue
		}
		f.cfg.Logger.Info("plugin manifest written from the API server", "file", path)
		changed = true
	}
	ents, err := os.ReadDir(f.cfg.Dir)
	if err != nil {
		f.cfg.Logger.Error("cannot read the managed plugin directory", "dir", f.cfg.Dir, "error", err)
		return changed
	}
	for _, de := range ents {
		name := de.Name()
		if _, ok := want[name]; ok || keep[name] {
			continue
		}
		path := filepath.Join(f.cfg.Dir, name)
		if err := os.RemoveAll(path); err != nil {
			f.cfg.Logger.Error("cannot remove a plugin manifest", "file", path, "error", err)
			continue
		}
		if !strings.HasPrefix(name, ".") {
			f.cfg.Logger.Info("plugin manifest removed: its WasmletPlugin is gone or no longer selects this node", "file", path)
			changed = true
		}
	}
	return changed
}
