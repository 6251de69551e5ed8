package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
)

// source is a plugin's files as read from disk: the validated manifest, the
// module bytes and where they came from.
type source struct {
	manifest     abi.Manifest
	manifestPath string // empty for a bare .wasm
	wasmPath     string
	wasm         []byte
	sha256       string
	synthesized  bool
	// resolved is set for a reference manifest: what the Resolver brought.
	resolved *Resolved
}

// readSource reads a manifest (and the .wasm it names) or a bare .wasm.
// sha256 is checked for a manifest; a bare module's manifest is completed
// from its exports later by the engine (synthesized = true). A reference
// manifest (image set) is resolved by r into the module's file and the
// effective manifest.
func readSource(ctx context.Context, path string, r Resolver) (*source, error) {
	if strings.HasSuffix(path, abi.ManifestSuffix) {
		return readManifest(ctx, path, r)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plugin file %s: %w", path, err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	name = sanitizeName(name)
	sum := sha256.Sum256(wasm)
	s := &source{wasmPath: path, wasm: wasm, sha256: hex.EncodeToString(sum[:]), synthesized: true}
	s.manifest = abi.Manifest{Name: name, Version: "0.0.0", Wasm: filepath.Base(path), SHA256: s.sha256}
	return s, nil
}

func readManifest(ctx context.Context, path string, r Resolver) (*source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w: %v", path, ErrManifest, err)
	}
	s := &source{manifestPath: path}
	if err := yaml.UnmarshalStrict(b, &s.manifest); err != nil {
		return nil, fmt.Errorf("manifest %s: %w: %v", path, ErrManifest, err)
	}
	if err := s.manifest.Validate(); err != nil {
		return nil, fmt.Errorf("manifest %s: %w: %v", path, ErrManifest, err)
	}
	wasmPath := s.manifest.Wasm
	if s.manifest.Reference() {
		if r == nil {
			return nil, fmt.Errorf("manifest %s: %w: image %s: a plugin in a registry is loaded by the agent, which pulls it (no resolver here)",
				path, ErrManifest, s.manifest.Image)
		}
		res, err := r.Resolve(ctx, path, s.manifest)
		if err != nil {
			return nil, err
		}
		s.manifest, s.resolved, wasmPath = res.Manifest, &res, res.WasmPath
	}
	if !filepath.IsAbs(wasmPath) {
		wasmPath = filepath.Join(filepath.Dir(path), wasmPath)
	}
	s.wasmPath = wasmPath
	if s.wasm, err = os.ReadFile(wasmPath); err != nil {
		return nil, fmt.Errorf("plugin %q: module %s: %w", s.manifest.Name, wasmPath, err)
	}
	sum := sha256.Sum256(s.wasm)
	s.sha256 = hex.EncodeToString(sum[:])
	if !strings.EqualFold(s.sha256, s.manifest.SHA256) {
		return nil, fmt.Errorf("plugin %q: %w: %s has sha256 %s, manifest %s says %s",
			s.manifest.Name, ErrSHA256, wasmPath, s.sha256, path, s.manifest.SHA256)
	}
	return s, nil
}

// sanitizeName turns a file name into a valid plugin name.
func sanitizeName(n string) string {
	n = strings.ToLower(n)
	var b strings.Builder
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		out = "plugin"
	}
	if len(out) > 63 {
		out = strings.Trim(out[:63], "-")
	}
	return out
}
