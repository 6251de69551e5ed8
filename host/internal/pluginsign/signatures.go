package pluginsign

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
)

// Limits on what is read of a signature image: cosign's own cap on the
// number of signatures, and a payload far larger than any simple-signing
// document.
const (
	maxSignatures   = 1000
	maxManifestSize = 4 << 20
	maxPayloadSize  = 1 << 20
)

// sigLayer is one signature as read from a signature image.
type sigLayer struct {
	digest      v1.Hash
	payload     []byte
	sig         []byte // decoded from AnnotationSignature
	annotations map[string]string
	// err is why the layer cannot be a valid signature at all (a
	// malformed annotation); such a layer is refused, the others are
	// still checked.
	err error
}

func (l sigLayer) verifyKey(v signature.Verifier) error {
	return v.VerifySignature(bytes.NewReader(l.sig), bytes.NewReader(l.payload))
}

// readSignatures reads the signature image at tag: the image (nil when
// the tag does not exist) and its signature layers. A layer of another
// media type is skipped, as cosign skips it.
func readSignatures(tag name.Tag, opts []remote.Option) (v1.Image, []sigLayer, error) {
	desc, err := remote.Get(tag, opts...)
	if err != nil {
		if isNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("read %s: %w", tag, classify(err))
	}
	if len(desc.Manifest) > maxManifestSize {
		return nil, nil, fmt.Errorf("%s: manifest of %d bytes, at most %d", tag, len(desc.Manifest), maxManifestSize)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", tag, err)
	}
	if len(m.Layers) > maxSignatures {
		return nil, nil, fmt.Errorf("%s: %d signatures, at most %d", tag, len(m.Layers), maxSignatures)
	}
	var out []sigLayer
	for _, d := range m.Layers {
		if d.MediaType != SimpleSigningMediaType {
			continue
		}
		l := sigLayer{digest: d.Digest, annotations: d.Annotations}
		if l.sig, err = base64.StdEncoding.DecodeString(d.Annotations[AnnotationSignature]); err != nil {
			l.err = fmt.Errorf("signature annotation: %v", err)
		}
		if d.Size < 0 || d.Size > maxPayloadSize {
			return nil, nil, fmt.Errorf("%s: layer %s: payload of %d bytes, at most %d", tag, d.Digest, d.Size, maxPayloadSize)
		}
		if l.payload, err = readBlob(tag.Digest(d.Digest.String()), d, opts); err != nil {
			return nil, nil, fmt.Errorf("%s: layer %s: %w", tag, d.Digest, err)
		}
		out = append(out, l)
	}
	return img, out, nil
}

// readBlob reads the blob d of tag's repository, at most its declared size,
// and checks its digest.
func readBlob(ref name.Digest, d v1.Descriptor, opts []remote.Option) ([]byte, error) {
	l, err := remote.Layer(ref, opts...)
	if err != nil {
		return nil, classify(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, classify(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, d.Size+1))
	if err != nil {
		return nil, classify(err)
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("%d bytes, the manifest says %d", len(b), d.Size)
	}
	h, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if h != d.Digest {
		return nil, fmt.Errorf("content has digest %s", h)
	}
	return b, nil
}

// isNotFound reports whether the registry answered that the tag or
// manifest does not exist.
func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// classify marks a registry error as ErrUnreachable: whatever kept the
// registry from answering (network, TLS, credentials, an error status)
// says nothing about the artifact's signatures. Other errors, such as
// content that does not match its digest, are left as they are.
func classify(err error) error {
	var (
		te *transport.Error
		ue *url.Error
		ne net.Error
	)
	switch {
	case errors.Is(err, ErrUnreachable):
		return err
	case errors.As(err, &te), errors.As(err, &ue), errors.As(err, &ne),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, pluginoci.ErrInsecure):
		return fmt.Errorf("%w: %w", ErrUnreachable, pluginoci.Explain(err))
	}
	return err
}
