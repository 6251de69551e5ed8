// Package pluginoci stores a wasmlet plugin in an OCI registry and brings it
// back: the artifact format and the registry client behind `wasmlet plugin
// push` and `wasmlet plugin pull`.
//
// A plugin is one artifact in the CNCF TAG Runtime "Wasm OCI Artifact"
// layout (https://tag-runtime.cncf.io/wgs/wasm/deliverables/wasm-oci-artifact/):
// an OCI image manifest whose config has the media type
// application/vnd.wasm.config.v0+json (created, author, architecture wasm,
// os wasip1, layerDigests) and whose first layer, the entrypoint, is the
// module as application/wasm. The plugin's manifest (*.plugin.yaml) and its
// test fixtures (tests/*.yaml) follow as layers of wasmlet's own media types.
// Every layer carries its file name in the org.opencontainers.image.title
// annotation, so a pull writes the same files with the same bytes.
//
// The registry side is go-containerregistry's: credentials from a keychain
// (~/.docker/config.json, a docker config file, a Kubernetes
// dockerconfigjson Secret), TLS with the system roots plus an optional CA,
// plain HTTP only to loopback registries.
package pluginoci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of a plugin artifact.
const (
	// ConfigMediaType is the Wasm OCI artifact's config media type.
	ConfigMediaType = "application/vnd.wasm.config.v0+json"
	// ModuleMediaType is the Wasm OCI artifact's layer media type: the
	// module, the artifact's first layer.
	ModuleMediaType = "application/wasm"
	// ManifestMediaType is wasmlet's media type for the plugin manifest
	// (<name>.plugin.yaml) layer.
	ManifestMediaType = "application/vnd.wasmlet.plugin.manifest.v1+yaml"
	// TestMediaType is wasmlet's media type for one test fixture
	// (tests/<case>.yaml) layer.
	TestMediaType = "application/vnd.wasmlet.plugin.test.v1+yaml"
)

// Values of the Wasm config's fields for a wasmlet plugin.
const (
	// Architecture is the config's architecture: always wasm.
	Architecture = "wasm"
	// OS is the config's os: wasip1, the target of modules (not
	// components) that wasmlet's ABI speaks.
	OS = "wasip1"
)

// Annotation keys used on the artifact.
const (
	// AnnotationTitle holds a layer's file name.
	AnnotationTitle = "org.opencontainers.image.title"
	// AnnotationVersion holds the plugin's version on the manifest.
	AnnotationVersion = "org.opencontainers.image.version"
	// AnnotationCreated holds the creation time on the manifest.
	AnnotationCreated = "org.opencontainers.image.created"
)

// Errors that Push and Pull wrap; test them with errors.Is. Each error also
// names the reference and the reason.
var (
	// ErrNotPlugin: the artifact is not a wasmlet plugin in the Wasm OCI
	// layout (manifest, config or layer media types, config fields, a
	// module that is not Wasm, a missing or duplicate layer).
	ErrNotPlugin = errors.New("not a wasmlet plugin artifact")
	// ErrTooLarge: a layer, the config or the manifest is larger than its cap.
	ErrTooLarge = errors.New("larger than allowed")
	// ErrUnsafeName: a file name in a title annotation is not a plain file
	// name (a path separator, "..", a leading dot, a control character).
	ErrUnsafeName = errors.New("unsafe file name")
	// ErrInsecure: plain HTTP to a registry that is not on loopback.
	ErrInsecure = errors.New("plain HTTP is allowed only to loopback registries")
	// ErrPlugin: the plugin on disk cannot be pushed (missing files, a
	// manifest the agent would refuse).
	ErrPlugin = errors.New("plugin cannot be pushed")
)

// Limits caps what a pull reads. The zero value of a field means its default.
type Limits struct {
	// Module caps the module layer; default 64 MiB.
	Module int64
	// File caps the manifest and each test layer; default 1 MiB.
	File int64
	// Tests caps the number of test layers; default 256.
	Tests int
}

// Default limits.
const (
	DefaultModuleLimit = 64 << 20
	DefaultFileLimit   = 1 << 20
	DefaultTestsLimit  = 256
	// configLimit caps the config blob; manifestLimit the OCI manifest.
	configLimit   = 64 << 10
	manifestLimit = 4 << 20
)

func (l Limits) withDefaults() Limits {
	if l.Module <= 0 {
		l.Module = DefaultModuleLimit
	}
	if l.File <= 0 {
		l.File = DefaultFileLimit
	}
	if l.Tests <= 0 {
		l.Tests = DefaultTestsLimit
	}
	return l
}

// File is one file of a plugin: a plain name and its bytes.
type File struct {
	// Name is the file's name: no directory part.
	Name string
	// Data is its content.
	Data []byte
}

// Plugin is a plugin as files: what Push reads and Pull returns.
type Plugin struct {
	// Module is the .wasm file.
	Module File
	// Manifest is the <name>.plugin.yaml file.
	Manifest File
	// Tests are the fixture files, written under tests/.
	Tests []File
}

// WasmConfig is the config of a Wasm OCI artifact
// (application/vnd.wasm.config.v0+json).
type WasmConfig struct {
	// Created is when the artifact was made (RFC 3339).
	Created time.Time `json:"created"`
	// Author is optional.
	Author string `json:"author,omitempty"`
	// Architecture is always "wasm".
	Architecture string `json:"architecture"`
	// OS is "wasip1" for a module, "wasip2" for a component.
	OS string `json:"os"`
	// LayerDigests are the digests of the manifest's layers, in order.
	LayerDigests []string `json:"layerDigests"`
	// Component is present for components (wasip2) only; wasmlet plugins
	// are modules and leave it out.
	Component *json.RawMessage `json:"component,omitempty"`
}

// Meta is what Push records about the artifact beyond the files.
type Meta struct {
	// Created goes into the config and the manifest's annotation; zero
	// means now.
	Created time.Time
	// Author goes into the config; optional.
	Author string
}

// artifact is a plugin as an OCI image: a manifest, a config and layers.
type artifact struct {
	manifest []byte
	config   []byte
	layers   map[v1.Hash]v1.Layer
}

var _ partial.CompressedImageCore = (*artifact)(nil)

func (a *artifact) RawConfigFile() ([]byte, error) { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}
func (a *artifact) RawManifest() ([]byte, error) { return a.manifest, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := a.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("no layer %s", h)
}

// image is a as a v1.Image, for remote.Write.
func (a *artifact) image() (v1.Image, error) { return partial.CompressedToImage(a) }

// newArtifact lays out a plugin: the module first, the manifest, then the
// tests in the given order.
func newArtifact(p *Plugin, meta Meta) (*artifact, error) {
	created := meta.Created
	if created.IsZero() {
		created = time.Now()
	}
	created = created.UTC()
	type entry struct {
		f  File
		mt types.MediaType
	}
	entries := []entry{{p.Module, ModuleMediaType}, {p.Manifest, ManifestMediaType}}
	for _, t := range p.Tests {
		entries = append(entries, entry{t, TestMediaType})
	}
	a := &artifact{layers: map[v1.Hash]v1.Layer{}}
	cfg := WasmConfig{Created: created, Author: meta.Author, Architecture: Architecture, OS: OS}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Annotations:   map[string]string{AnnotationCreated: created.Format(time.RFC3339)},
	}
	for _, e := range entries {
		if err := checkName(e.f.Name); err != nil {
			return nil, err
		}
		l := static.NewLayer(e.f.Data, e.mt)
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		a.layers[d] = l
		cfg.LayerDigests = append(cfg.LayerDigests, d.String())
		m.Layers = append(m.Layers, v1.Descriptor{
			MediaType:   e.mt,
			Size:        int64(len(e.f.Data)),
			Digest:      d,
			Annotations: map[string]string{AnnotationTitle: e.f.Name},
		})
	}
	var err error
	if a.config, err = json.Marshal(cfg); err != nil {
		return nil, err
	}
	cd, _, err := v1.SHA256(bytes.NewReader(a.config))
	if err != nil {
		return nil, err
	}
	m.Config = v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(a.config)), Digest: cd}
	if a.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return a, nil
}

// checkLayout checks an artifact's manifest and config against the Wasm
// OCI layout and wasmlet's layers, and returns the layers by role.
func checkLayout(m *v1.Manifest, config []byte, lim Limits) (module v1.Descriptor, manifest v1.Descriptor, tests []v1.Descriptor, err error) {
	notPlugin := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrNotPlugin, fmt.Sprintf(format, args...))
	}
	if m.MediaType != "" && m.MediaType != types.OCIManifestSchema1 {
		return module, manifest, nil, notPlugin("manifest media type %s, want %s", m.MediaType, types.OCIManifestSchema1)
	}
	if m.Config.MediaType != ConfigMediaType {
		return module, manifest, nil, notPlugin("config media type %q, want %s", m.Config.MediaType, ConfigMediaType)
	}
	var cfg WasmConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return module, manifest, nil, notPlugin("config: %v", err)
	}
	if cfg.Architecture != Architecture || cfg.OS != OS {
		return module, manifest, nil, notPlugin("config: architecture %q os %q, want %s %s (a module, not a component)", cfg.Architecture, cfg.OS, Architecture, OS)
	}
	if len(m.Layers) == 0 {
		return module, manifest, nil, notPlugin("no layers")
	}
	if cfg.LayerDigests != nil {
		ok := len(cfg.LayerDigests) == len(m.Layers)
		for i := 0; ok && i < len(m.Layers); i++ {
			ok = cfg.LayerDigests[i] == m.Layers[i].Digest.String()
		}
		if !ok {
			return module, manifest, nil, notPlugin("config's layerDigests do not list the manifest's layers in order")
		}
	}
	if mt := m.Layers[0].MediaType; mt != ModuleMediaType {
		return module, manifest, nil, notPlugin("layer 0 (the entrypoint) has media type %q, want %s", mt, ModuleMediaType)
	}
	module = m.Layers[0]
	names := map[string]bool{}
	haveManifest := false
	for i, l := range m.Layers {
		title := l.Annotations[AnnotationTitle]
		if err := checkName(title); err != nil {
			return module, manifest, nil, fmt.Errorf("layer %d (%s): %w", i, l.MediaType, err)
		}
		if names[title] {
			return module, manifest, nil, notPlugin("two layers named %q", title)
		}
		names[title] = true
		limit := lim.File
		switch l.MediaType {
		case ModuleMediaType:
			if i > 0 {
				return module, manifest, nil, notPlugin("layer %d is a second module (%s)", i, ModuleMediaType)
			}
			if !strings.HasSuffix(title, ".wasm") {
				return module, manifest, nil, notPlugin("module layer titled %q, want a .wasm file name", title)
			}
			limit = lim.Module
		case ManifestMediaType:
			if haveManifest {
				return module, manifest, nil, notPlugin("two manifest layers")
			}
			if !strings.HasSuffix(title, manifestSuffix) || title == manifestSuffix[1:] {
				return module, manifest, nil, notPlugin("manifest layer titled %q, want <name>%s", title, manifestSuffix)
			}
			haveManifest, manifest = true, l
		case TestMediaType:
			if !strings.HasSuffix(title, ".yaml") {
				return module, manifest, nil, notPlugin("test layer titled %q, want a .yaml file name", title)
			}
			tests = append(tests, l)
			if len(tests) > lim.Tests {
				return module, manifest, nil, fmt.Errorf("%d test layers: %w (at most %d)", len(tests), ErrTooLarge, lim.Tests)
			}
		default:
			return module, manifest, nil, notPlugin("layer %d has media type %q, not one of %s, %s, %s", i, l.MediaType, ModuleMediaType, ManifestMediaType, TestMediaType)
		}
		if l.Size < 0 || l.Size > limit {
			return module, manifest, nil, fmt.Errorf("layer %d (%s, %s): %d bytes: %w (at most %d)", i, title, l.MediaType, l.Size, ErrTooLarge, limit)
		}
	}
	if !haveManifest {
		return module, manifest, nil, notPlugin("no plugin manifest layer (%s): a Wasm artifact, but not a wasmlet plugin", ManifestMediaType)
	}
	return module, manifest, tests, nil
}

// readBlob reads a layer's bytes, at most its descriptor's size, and checks
// size and digest.
func readBlob(l v1.Layer, d v1.Descriptor) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, d.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("%w: blob %s has %d bytes or more, its descriptor says %d", ErrNotPlugin, d.Digest, len(b), d.Size)
	}
	got, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if got != d.Digest {
		return nil, fmt.Errorf("%w: blob %s has digest %s", ErrNotPlugin, d.Digest, got)
	}
	return b, nil
}
