package pluginsign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/wasmlet/wasmlet/abi"
)

// fulcioIssuerV2 is the Fulcio extension naming the OIDC issuer (a DER
// UTF8String), as Fulcio writes it.
var fulcioIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}

const (
	testIssuer  = "https://issuer.example"
	testSubject = "signer@example.com"
)

// sigstore is throwaway keyless material made offline: a CA standing for
// Fulcio, a key standing for Rekor's, and the trusted_root.json naming
// both.
type sigstore struct {
	caKey, rekorKey *ecdsa.PrivateKey
	ca              *x509.Certificate
	logID           []byte
	rootFile        string
}

func newSigstore(t *testing.T, now time.Time) *sigstore {
	t.Helper()
	s := &sigstore{caKey: genKey(t), rekorKey: genKey(t)}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test fulcio"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, s.caKey.Public(), s.caKey)
	if err != nil {
		t.Fatal(err)
	}
	if s.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	pkix, err := x509.MarshalPKIXPublicKey(s.rekorKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	id := sha256.Sum256(pkix)
	s.logID = id[:]
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{
			Root: s.ca, ValidityPeriodStart: now.Add(-time.Hour), ValidityPeriodEnd: now.Add(48 * time.Hour), URI: "https://fulcio.example",
		}},
		nil, nil,
		map[string]*root.TransparencyLog{hex.EncodeToString(s.logID): {
			BaseURL: "https://rekor.example", ID: s.logID, ValidityPeriodStart: now.Add(-time.Hour),
			HashFunc: crypto.SHA256, PublicKey: s.rekorKey.Public(), SignatureHashFunc: crypto.SHA256,
		}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s.rootFile = filepath.Join(t.TempDir(), "trusted_root.json")
	writeFile(t, s.rootFile, b)
	return s
}

func genKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keylessSig says how to make one keyless signature layer.
type keylessSig struct {
	subject, issuer string
	notBefore       time.Time // the certificate's validity: 10 minutes from it
	integrated      time.Time // Rekor's integrated time
	caKey           *ecdsa.PrivateKey
	ca              *x509.Certificate
	rekorKey        *ecdsa.PrivateKey
}

// layer signs ref as a keyless cosign signature: a leaf certificate from
// the CA, the signature with its key, a hashedrekord entry and its SET.
func (k keylessSig) layer(t *testing.T, ref name.Digest) sigLayer {
	t.Helper()
	leafKey := genKey(t)
	issuer, err := asn1.MarshalWithParams(k.issuer, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), EmailAddresses: []string{k.subject},
		NotBefore: k.notBefore, NotAfter: k.notBefore.Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: fulcioIssuerV2, Value: issuer}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, k.ca, leafKey.Public(), k.caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := cryptoutils.PEMEncode(cryptoutils.CertificatePEMType, der)
	body, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(body)
	sig, err := ecdsa.SignASN1(rand.Reader, leafKey, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := json.Marshal(map[string]any{
		"apiVersion": "0.0.1", "kind": "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(digest[:])}},
			"signature": map[string]any{"content": base64.StdEncoding.EncodeToString(sig), "publicKey": map[string]any{"content": base64.StdEncoding.EncodeToString(certPEM)}},
		},
	})
	pkixKey, _ := x509.MarshalPKIXPublicKey(k.rekorKey.Public())
	logID := sha256.Sum256(pkixKey)
	var rb rekorBundle
	rb.Payload.Body = base64.StdEncoding.EncodeToString(entry)
	rb.Payload.IntegratedTime = k.integrated.Unix()
	rb.Payload.LogIndex = 42
	rb.Payload.LogID = hex.EncodeToString(logID[:])
	// The SET signs the canonical JSON of the payload: keys sorted, no
	// white space — what encoding/json writes for a map of these values.
	canonical, _ := json.Marshal(map[string]any{
		"body": rb.Payload.Body, "integratedTime": rb.Payload.IntegratedTime,
		"logIndex": rb.Payload.LogIndex, "logID": rb.Payload.LogID,
	})
	h := sha256.Sum256(canonical)
	if rb.SignedEntryTimestamp, err = ecdsa.SignASN1(rand.Reader, k.rekorKey, h[:]); err != nil {
		t.Fatal(err)
	}
	bundleJSON, _ := json.Marshal(rb)
	return sigLayer{payload: body, sig: sig, annotations: map[string]string{
		AnnotationSignature:   base64.StdEncoding.EncodeToString(sig),
		AnnotationCertificate: string(certPEM),
		AnnotationChain:       string(cryptoutils.PEMEncode(cryptoutils.CertificatePEMType, k.ca.Raw)),
		AnnotationBundle:      string(bundleJSON),
	}}
}

func TestVerifyRef_Keyless(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	s := newSigstore(t, now)
	good := keylessSig{subject: testSubject, issuer: testIssuer, notBefore: now.Add(-time.Minute), integrated: now,
		caKey: s.caKey, ca: s.ca, rekorKey: s.rekorKey}
	identity := func(issuer, subject, re string) *abi.Verification {
		return &abi.Verification{Keyless: []abi.KeylessIdentity{{Issuer: issuer, Subject: subject, SubjectRegExp: re}}, TrustedRoot: s.rootFile}
	}
	verify := func(t *testing.T, sig keylessSig, v *abi.Verification) error {
		ref := e.push(t, "keyless")
		e.writeSigLayers(t, ref, []sigLayer{sig.layer(t, ref)})
		return e.verify(ref, v)
	}
	otherCA := newSigstore(t, now)

	for _, tc := range []struct {
		name string
		sig  keylessSig
		v    *abi.Verification
		want error // nil: accepted
	}{
		{"the identity", good, identity(testIssuer, testSubject, ""), nil},
		{"the identity by regexp", good, identity(testIssuer, "", `^.*@example\.com$`), nil},
		{"another subject", good, identity(testIssuer, "other@example.com", ""), ErrIdentityMismatch},
		{"another issuer", good, identity("https://other.example", testSubject, ""), ErrIdentityMismatch},
		{"a certificate from a CA not in the root", func() keylessSig { k := good; k.caKey, k.ca = otherCA.caKey, otherCA.ca; return k }(),
			identity(testIssuer, testSubject, ""), ErrBadSignature},
		{"a SET from a log not in the root", func() keylessSig { k := good; k.rekorKey = otherCA.rekorKey; return k }(),
			identity(testIssuer, testSubject, ""), ErrBadSignature},
		{"logged after the certificate expired", func() keylessSig { k := good; k.integrated = now.Add(time.Hour); return k }(),
			identity(testIssuer, testSubject, ""), ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verify(t, tc.sig, tc.v)
			if tc.want == nil && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}

	t.Run("a keyless signature without a Rekor bundle", func(t *testing.T) {
		ref := e.push(t, "keyless")
		l := good.layer(t, ref)
		delete(l.annotations, AnnotationBundle)
		e.writeSigLayers(t, ref, []sigLayer{l})
		if err := e.verify(ref, identity(testIssuer, testSubject, "")); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("got %v, want ErrBadSignature", err)
		}
	})
	t.Run("a key signature where a keyless one is asked for", func(t *testing.T) {
		ref := e.push(t, "keyless")
		key, _ := keyPair(t, "")
		e.sign(t, ref, key, "")
		if err := e.verify(ref, identity(testIssuer, testSubject, "")); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("got %v, want ErrBadSignature", err)
		}
	})
}
