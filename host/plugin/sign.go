package plugin

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
	"github.com/wasmlet/wasmlet/host/internal/pluginsign"
)

// SignConfig says which plugin artifact Sign signs, and with which key.
type SignConfig struct {
	// Ref is the artifact (REGISTRY/REPO:TAG or @sha256:…); a tag is
	// resolved to its digest, and the digest is signed.
	Ref string
	// KeyFile is a cosign private key (cosign.key).
	KeyFile string
	// Password decrypts KeyFile.
	Password []byte
	// Registry says how to reach the registry.
	Registry RegistryConfig
}

// Sign signs a plugin artifact as `cosign sign --key KEY
// --tlog-upload=false` does: a simple-signing payload naming the digest,
// signed with the key, appended to the artifact's signature image
// (tag sha256-HEX.sig); the signatures already there are kept. It returns
// the digest reference signed.
func Sign(ctx context.Context, cfg SignConfig) (digest string, err error) {
	k, err := pluginsign.LoadPrivateKey(cfg.KeyFile, cfg.Password)
	if err != nil {
		return "", err
	}
	c, d, err := cfg.Registry.resolve(ctx, cfg.Ref)
	if err != nil {
		return "", err
	}
	if _, err := pluginsign.Sign(ctx, pluginsign.SignConfig{Ref: d, Key: k, Remote: c.RemoteOptions(ctx)}); err != nil {
		return "", err
	}
	return d.String(), nil
}

// VerifyConfig says which plugin artifact Verify checks, and against what.
type VerifyConfig struct {
	// Ref is the artifact (REGISTRY/REPO:TAG or @sha256:…); a tag is
	// resolved to its digest first.
	Ref string
	// Verification lists the accepted keys (PEM files or inline PEM) and
	// keyless identities with their trusted root, as a manifest's
	// verification field does; relative paths are relative to the
	// current directory.
	Verification abi.Verification
	// Registry says how to reach the registry.
	Registry RegistryConfig
}

// Why Verify refused an artifact; errors.Is tells them apart.
var (
	// ErrNoSignature: the artifact carries no signature.
	ErrNoSignature = pluginsign.ErrNoSignature
	// ErrDigestMismatch: its signatures are over another digest.
	ErrDigestMismatch = pluginsign.ErrDigestMismatch
	// ErrBadSignature: no signature verifies against the keys or the
	// trusted root.
	ErrBadSignature = pluginsign.ErrBadSignature
	// ErrIdentityMismatch: a keyless signature's identity is not one of
	// those asked for.
	ErrIdentityMismatch = pluginsign.ErrIdentityMismatch
	// ErrUnreachable: the registry could not be asked; nothing is known
	// of the signatures.
	ErrUnreachable = pluginsign.ErrUnreachable
)

// Verify checks that one of the artifact's cosign signatures (the
// sha256-HEX.sig tag, as `cosign verify` reads it) is over its digest and
// verifies against one of the keys or keyless identities. It returns the
// digest reference verified. Errors name the reference and wrap one of
// ErrNoSignature, ErrDigestMismatch, ErrBadSignature, ErrIdentityMismatch
// or ErrUnreachable.
func Verify(ctx context.Context, cfg VerifyConfig) (digest string, err error) {
	c, d, err := cfg.Registry.resolve(ctx, cfg.Ref)
	if err != nil {
		return "", err
	}
	v := cfg.Verification
	err = pluginsign.VerifyRef(ctx, pluginsign.VerifyConfig{Ref: d, Verification: &v, Remote: c.RemoteOptions(ctx)})
	return d.String(), err
}

// resolve is the registry client c describes and ref by digest.
func (c RegistryConfig) resolve(ctx context.Context, ref string) (*pluginoci.Client, name.Digest, error) {
	client, err := c.client()
	if err != nil {
		return nil, name.Digest{}, err
	}
	d, err := client.DigestRef(ctx, ref)
	return client, d, err
}
