package pluginsign

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation: Rekor's
// signed entry timestamp (SET) and the entry it signs.
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           string `json:"body"` // base64 of the canonical entry
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"` // hex
	} `json:"Payload"`
}

// checkKeyless verifies a keyless signature layer with sigstore-go: its
// certificate, chain and Rekor bundle are put into a Sigstore bundle (v0.1,
// whose log entries carry an inclusion promise) and verified against the
// trusted root and c's identities.
func (c *checker) checkKeyless(l sigLayer) (reason, err error) {
	bad := func(reason error, err error) (error, error) {
		return reason, fmt.Errorf("%w: layer %s: %v", reason, l.digest, err)
	}
	b, err := sigstoreBundle(l)
	if err != nil {
		return bad(ErrBadSignature, err)
	}
	opts := make([]verify.PolicyOption, 0, len(c.identities))
	for _, id := range c.identities {
		opts = append(opts, verify.WithCertificateIdentity(id))
	}
	_, err = c.keyless.Verify(b, verify.NewPolicy(verify.WithArtifact(bytes.NewReader(l.payload)), opts...))
	var mismatch *verify.ErrNoMatchingCertificateIdentity
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &mismatch):
		return bad(ErrIdentityMismatch, err)
	}
	return bad(ErrBadSignature, err)
}

// sigstoreBundle is layer l's keyless signature as a Sigstore bundle.
func sigstoreBundle(l sigLayer) (*bundle.Bundle, error) {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(l.annotations[AnnotationCertificate]))
	if err != nil || len(certs) != 1 {
		return nil, fmt.Errorf("certificate annotation: want one PEM certificate (%v)", err)
	}
	chain := []*protocommon.X509Certificate{{RawBytes: certs[0].Raw}}
	if s := l.annotations[AnnotationChain]; s != "" {
		rest, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("chain annotation: %v", err)
		}
		for _, c := range rest {
			chain = append(chain, &protocommon.X509Certificate{RawBytes: c.Raw})
		}
	}
	s := l.annotations[AnnotationBundle]
	if s == "" {
		return nil, errors.New("no Rekor bundle (dev.sigstore.cosign/bundle): a keyless signature must be in the transparency log")
	}
	var rb rekorBundle
	if err := json.Unmarshal([]byte(s), &rb); err != nil {
		return nil, fmt.Errorf("Rekor bundle: %v", err)
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, fmt.Errorf("Rekor bundle: body: %v", err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("Rekor bundle: logID: %v", err)
	}
	var kind struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kind); err != nil {
		return nil, fmt.Errorf("Rekor bundle: entry: %v", err)
	}
	digest := sha256.Sum256(l.payload)
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle+json;version=0.1",
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_X509CertificateChain{
				X509CertificateChain: &protocommon.X509CertificateChain{Certificates: chain},
			},
			TlogEntries: []*protorekor.TransparencyLogEntry{{
				LogIndex:          rb.Payload.LogIndex,
				LogId:             &protocommon.LogId{KeyId: logID},
				KindVersion:       &protorekor.KindVersion{Kind: kind.Kind, Version: kind.APIVersion},
				IntegratedTime:    rb.Payload.IntegratedTime,
				InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
				CanonicalizedBody: body,
			}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: digest[:]},
			Signature:     l.sig,
		}},
	}
	return bundle.NewBundle(pb)
}
