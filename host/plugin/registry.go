package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// RegistryConfig says how to reach an OCI registry. A registry on loopback
// (localhost, 127.0.0.0/8, ::1) may answer plain HTTP; any other must speak
// TLS.
type RegistryConfig struct {
	// DockerConfig is a docker config.json holding the credentials; empty
	// means the user's own (~/.docker/config.json, or $DOCKER_CONFIG).
	DockerConfig string
	// CAFile is a PEM file of certificate authorities trusted besides the
	// system's, for a registry with a private CA.
	CAFile string
}

// client is the registry client c describes.
func (c RegistryConfig) client() (*pluginoci.Client, error) {
	cfg := pluginoci.Config{CAFile: c.CAFile}
	if c.DockerConfig != "" {
		kc, err := pluginoci.KeychainFromDockerConfigFile(c.DockerConfig)
		if err != nil {
			return nil, err
		}
		cfg.Keychain = kc
	}
	return pluginoci.New(cfg)
}

// PushConfig says which plugin Push pushes, and where.
type PushConfig struct {
	// Path is the plugin's manifest (*.plugin.yaml) or a directory holding
	// exactly one; the module it names is beside it.
	Path string
	// TestsDir holds the test fixtures (*.yaml); empty means tests/ beside
	// the manifest, if present.
	TestsDir string
	// Ref is the image reference to push to (REGISTRY/REPO:TAG).
	Ref string
	// Author is recorded in the artifact's config; optional.
	Author string
	// Created is recorded in the artifact; zero means now.
	Created time.Time
	// Registry says how to reach the registry.
	Registry RegistryConfig
}

// Push puts a plugin (module, manifest, test fixtures) into a registry as one
// Wasm OCI artifact and returns its manifest digest. It refuses a plugin
// the agent would refuse (a manifest that does not validate or whose sha256
// is not the module's). Errors name the path or the reference and the
// reason.
func Push(ctx context.Context, cfg PushConfig) (digest string, err error) {
	p, err := pluginoci.ReadPlugin(cfg.Path, cfg.TestsDir)
	if err != nil {
		return "", err
	}
	c, err := cfg.Registry.client()
	if err != nil {
		return "", err
	}
	d, err := c.Push(ctx, cfg.Ref, p, pluginoci.Meta{Created: cfg.Created, Author: cfg.Author})
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// PullConfig says which plugin Pull pulls, and where to.
type PullConfig struct {
	// Ref is the image reference (REGISTRY/REPO:TAG or @sha256:…).
	Ref string
	// Dir receives the files; it is created if missing, and files of
	// other names in it are left alone.
	Dir string
	// Registry says how to reach the registry.
	Registry RegistryConfig
}

// Pulled is what Pull wrote.
type Pulled struct {
	// Digest is the artifact's manifest digest.
	Digest string
	// Files are the paths written, the manifest last.
	Files []string
}

// Pull brings a plugin pushed by Push back into a directory, byte for byte:
// the same file names, the same bytes. The artifact is checked before
// anything is written (media types, size caps, file names, each blob's
// digest, the manifest's sha256 against the module), and the files are
// written into a temporary directory and renamed into place at the end.
func Pull(ctx context.Context, cfg PullConfig) (Pulled, error) {
	c, err := cfg.Registry.client()
	if err != nil {
		return Pulled{}, err
	}
	p, d, err := c.Pull(ctx, cfg.Ref)
	if err != nil {
		return Pulled{}, err
	}
	if err := p.WriteDir(cfg.Dir); err != nil {
		return Pulled{}, fmt.Errorf("pull %s: write %s: %w", cfg.Ref, cfg.Dir, err)
	}
	out := Pulled{Digest: d.String(), Files: []string{filepath.Join(cfg.Dir, p.Module.Name)}}
	for _, t := range p.Tests {
		out.Files = append(out.Files, filepath.Join(cfg.Dir, pluginoci.TestsDir, t.Name))
	}
	out.Files = append(out.Files, filepath.Join(cfg.Dir, p.Manifest.Name))
	return out, nil
}
