package pluginsign

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// The media type and annotations of cosign's signature layers.
const (
	// SimpleSigningMediaType is the media type of a signature layer.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// AnnotationSignature holds the base64 signature of the layer's payload.
	AnnotationSignature = "dev.cosignproject.cosign/signature"
	// AnnotationCertificate holds a keyless signer's PEM certificate.
	AnnotationCertificate = "dev.sigstore.cosign/certificate"
	// AnnotationChain holds the PEM chain from the certificate to its root.
	AnnotationChain = "dev.sigstore.cosign/chain"
	// AnnotationBundle holds Rekor's signed entry timestamp and log entry.
	AnnotationBundle = "dev.sigstore.cosign/bundle"
)

// SignatureTag is the tag cosign stores the signatures of digest under:
// sha256-HEX.sig in the digest's repository.
func SignatureTag(digest name.Digest) name.Tag {
	return digest.Context().Tag(strings.Replace(digest.DigestStr(), ":", "-", 1) + ".sig")
}

// SignConfig says what Sign signs, with which key, and how it reaches the
// registry.
type SignConfig struct {
	// Ref is the artifact, by digest.
	Ref name.Digest
	// Key signs.
	Key *PrivateKey
	// Remote are the registry options (pluginoci.Client.RemoteOptions).
	Remote []remote.Option
}

// Sign signs cfg.Ref as `cosign sign --key K --tlog-upload=false` does and
// appends the signature to the artifact's signature image (SignatureTag),
// keeping the signatures already there. A signature by the same key over
// the same payload already there is not added twice. It returns the
// signature tag.
func Sign(ctx context.Context, cfg SignConfig) (name.Tag, error) {
	tag := SignatureTag(cfg.Ref)
	fail := func(err error) (name.Tag, error) { return tag, fmt.Errorf("sign %s: %w", cfg.Ref, err) }
	body, err := payload.Cosign{Image: cfg.Ref}.MarshalJSON()
	if err != nil {
		return fail(err)
	}
	sig, err := cfg.Key.signer.SignMessage(bytes.NewReader(body), options.WithRand(rand.Reader))
	if err != nil {
		return fail(fmt.Errorf("key %s: %v", cfg.Key.File, err))
	}
	opts := append(cfg.Remote, remote.WithContext(ctx))
	base, existing, err := readSignatures(tag, opts)
	if err != nil {
		return fail(err)
	}
	for _, l := range existing {
		if bytes.Equal(l.payload, body) && l.verifyKey(cfg.Key.signer) == nil {
			return tag, nil
		}
	}
	if base == nil {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(body, SimpleSigningMediaType),
		Annotations: map[string]string{AnnotationSignature: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return fail(err)
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return fail(fmt.Errorf("write %s: %w", tag, classify(err)))
	}
	return tag, nil
}
