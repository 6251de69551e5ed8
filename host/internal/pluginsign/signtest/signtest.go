// Package signtest makes cosign key pairs for tests of plugin signing.
package signtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// SigstorePrivateKeyPEM is the PEM type `cosign generate-key-pair` writes.
const SigstorePrivateKeyPEM = "ENCRYPTED SIGSTORE PRIVATE KEY"

// KeyPair writes a new ECDSA P-256 cosign key pair (cosign.key encrypted
// with password, cosign.pub) into a new directory and returns the files.
func KeyPair(t testing.TB, password string) (keyFile, pubFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return WriteKey(t, k, SigstorePrivateKeyPEM, password)
}

// WriteKey writes k as a cosign key pair: the private key PKCS #8,
// encrypted with password, in a PEM block of type pemType, and its public
// key; into a new directory.
func WriteKey(t testing.TB, k *ecdsa.PrivateKey, pemType, password string) (keyFile, pubFile string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encrypted.Encrypt(der, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile, pubFile = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: enc}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile, pubFile
}
