package pluginsign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PEM block types of cosign's encrypted private keys: the current one and
// the one cosign wrote before it.
const (
	sigstorePrivateKeyPEM = "ENCRYPTED SIGSTORE PRIVATE KEY"
	cosignPrivateKeyPEM   = "ENCRYPTED COSIGN PRIVATE KEY"
)

// ErrKey: a key file could not be used (unreadable, not a cosign key, the
// wrong password, a key type other than ECDSA P-256).
var ErrKey = errors.New("unusable key")

// PrivateKey is a cosign signing key.
type PrivateKey struct {
	// File is the file the key was read from.
	File   string
	signer signature.SignerVerifier
}

// LoadPrivateKey reads a cosign private key file and decrypts it with
// password. Errors name the file.
func LoadPrivateKey(path string, password []byte) (*PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrKey, path, err)
	}
	k, err := parsePrivateKey(b, password)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrKey, path, err)
	}
	k.File = path
	return k, nil
}

func parsePrivateKey(b, password []byte) (*PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block in it")
	}
	if block.Type != sigstorePrivateKeyPEM && block.Type != cosignPrivateKeyPEM {
		return nil, fmt.Errorf("a PEM %q, want a cosign private key (%q)", block.Type, sigstorePrivateKeyPEM)
	}
	der, err := encrypted.Decrypt(block.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("decrypt (wrong password?): %v", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("decrypted key: %v", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("a %s key, want ECDSA P-256", keyType(key))
	}
	sv, err := signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{signer: sv}, nil
}

// PublicKeyPEM is the key's public half as cosign writes it (cosign.pub).
func (k *PrivateKey) PublicKeyPEM() ([]byte, error) {
	pub, err := k.signer.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// publicKey is a verification key and where it came from.
type publicKey struct {
	name     string // the file, or "inline key N"
	verifier signature.Verifier
}

// loadPublicKey reads a PEM public key: a file, or the PEM text itself
// when s starts with "-----BEGIN".
func loadPublicKey(s, name string) (publicKey, error) {
	var b []byte
	if strings.HasPrefix(strings.TrimSpace(s), "-----BEGIN") {
		b = []byte(s)
	} else {
		var err error
		if b, err = os.ReadFile(s); err != nil {
			return publicKey{}, fmt.Errorf("%w %s: %v", ErrKey, name, err)
		}
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return publicKey{}, fmt.Errorf("%w %s: not a PEM public key: %v", ErrKey, name, err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return publicKey{}, fmt.Errorf("%w %s: a %s key, want ECDSA P-256", ErrKey, name, keyType(pub))
	}
	v, err := signature.LoadECDSAVerifier(ec, crypto.SHA256)
	if err != nil {
		return publicKey{}, fmt.Errorf("%w %s: %v", ErrKey, name, err)
	}
	return publicKey{name: name, verifier: v}, nil
}

// keyType names a key's algorithm (and curve) for an error message.
func keyType(k any) string {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return "ECDSA " + k.Curve.Params().Name
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", k), "*")
}
