package pluginsign

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
	"github.com/wasmlet/wasmlet/host/internal/pluginsign/signtest"
)

// env is an in-memory registry and a client for it.
type env struct {
	host   string
	client *pluginoci.Client
	srv    *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	c, err := pluginoci.New(pluginoci.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &env{host: strings.TrimPrefix(srv.URL, "http://"), client: c, srv: srv}
}

func (e *env) opts() []remote.Option { return e.client.RemoteOptions(context.Background()) }

// push writes a random image to repo and returns its digest reference.
func (e *env) push(t *testing.T, repo string) name.Digest {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := pluginoci.ParseReference(e.host + "/" + repo + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, e.opts()...); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(d.String())
}

// keyPair writes a cosign key pair (cosign.key encrypted with password,
// cosign.pub) into a new directory.
func keyPair(t *testing.T, password string) (keyFile, pubFile string) {
	t.Helper()
	return signtest.KeyPair(t, password)
}

// writeKey writes k as a cosign key pair in a PEM block of type pemType.
func writeKey(t *testing.T, k *ecdsa.PrivateKey, pemType, password string) (keyFile, pubFile string) {
	t.Helper()
	return signtest.WriteKey(t, k, pemType, password)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (e *env) sign(t *testing.T, ref name.Digest, keyFile, password string) {
	t.Helper()
	k, err := LoadPrivateKey(keyFile, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sign(context.Background(), SignConfig{Ref: ref, Key: k, Remote: e.opts()}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) verify(ref name.Digest, v *abi.Verification) error {
	return VerifyRef(context.Background(), VerifyConfig{Ref: ref, Verification: v, Remote: e.opts()})
}

// sigLayers reads the signature image of ref.
func (e *env) sigLayers(t *testing.T, ref name.Digest) []sigLayer {
	t.Helper()
	img, layers, err := readSignatures(SignatureTag(ref), e.opts())
	if err != nil || img == nil {
		t.Fatalf("signature image of %s: %v (image %v)", ref, err, img)
	}
	return layers
}

// writeSigLayers replaces ref's signature image by one of layers.
func (e *env) writeSigLayers(t *testing.T, ref name.Digest, layers []sigLayer) {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(l.payload, SimpleSigningMediaType), Annotations: l.annotations})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := remote.Write(SignatureTag(ref), img, e.opts()...); err != nil {
		t.Fatal(err)
	}
}

func TestSign_Verify(t *testing.T) {
	e := newEnv(t)
	ref := e.push(t, "policies/deny")
	key, pub := keyPair(t, "secret")
	e.sign(t, ref, key, "secret")

	if err := e.verify(ref, &abi.Verification{Keys: []string{pub}}); err != nil {
		t.Fatalf("verify with the signing key: %v", err)
	}
	// The layer is cosign's: the simple-signing payload, its media type,
	// the signature in the annotation.
	layers := e.sigLayers(t, ref)
	if len(layers) != 1 {
		t.Fatalf("%d signature layers, want 1", len(layers))
	}
	want := `{"critical":{"identity":{"docker-reference":"` + ref.Context().Name() + `"},"image":{"docker-manifest-digest":"` +
		ref.DigestStr() + `"},"type":"cosign container image signature"},"optional":null}`
	if string(layers[0].payload) != want {
		t.Errorf("payload\n%s\nwant\n%s", layers[0].payload, want)
	}
	if SignatureTag(ref).TagStr() != "sha256-"+strings.TrimPrefix(ref.DigestStr(), "sha256:")+".sig" {
		t.Errorf("signature tag %s", SignatureTag(ref))
	}
	// Inline PEM verifies as a file does.
	pemText, _ := os.ReadFile(pub)
	if err := e.verify(ref, &abi.Verification{Keys: []string{string(pemText)}}); err != nil {
		t.Errorf("verify with the inline key: %v", err)
	}

	// A second key's signature is appended; the same key's again is not.
	key2, pub2 := keyPair(t, "")
	e.sign(t, ref, key2, "")
	e.sign(t, ref, key, "secret")
	if n := len(e.sigLayers(t, ref)); n != 2 {
		t.Errorf("%d signature layers after signing with a second key and the first again, want 2", n)
	}
	for _, p := range []string{pub, pub2} {
		if err := e.verify(ref, &abi.Verification{Keys: []string{p}}); err != nil {
			t.Errorf("verify with %s: %v", p, err)
		}
	}
}

func TestVerifyRef_Refused(t *testing.T) {
	e := newEnv(t)
	ref := e.push(t, "p")
	other := e.push(t, "p")
	key, pub := keyPair(t, "pw")
	_, wrongPub := keyPair(t, "pw")
	e.sign(t, ref, key, "pw")

	t.Run("wrong key", func(t *testing.T) {
		err := e.verify(ref, &abi.Verification{Keys: []string{wrongPub}})
		if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), ref.String()) || !strings.Contains(err.Error(), wrongPub) {
			t.Errorf("got %v, want ErrBadSignature naming %s and %s", err, ref, wrongPub)
		}
	})
	t.Run("missing signature", func(t *testing.T) {
		err := e.verify(other, &abi.Verification{Keys: []string{pub}})
		if !errors.Is(err, ErrNoSignature) || !strings.Contains(err.Error(), other.String()) {
			t.Errorf("got %v, want ErrNoSignature naming %s", err, other)
		}
	})
	t.Run("signature over another digest", func(t *testing.T) {
		e.writeSigLayers(t, other, e.sigLayers(t, ref))
		err := e.verify(other, &abi.Verification{Keys: []string{pub}})
		if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), ref.DigestStr()) {
			t.Errorf("got %v, want ErrDigestMismatch naming %s", err, ref.DigestStr())
		}
	})
	t.Run("tampered payload", func(t *testing.T) {
		third := e.push(t, "p")
		e.sign(t, third, key, "pw")
		layers := e.sigLayers(t, third)
		layers[0].payload = bytes.Replace(layers[0].payload, []byte(`"optional":null`), []byte(`"optional":{"x":"y"}`), 1)
		e.writeSigLayers(t, third, layers)
		err := e.verify(third, &abi.Verification{Keys: []string{pub}})
		if !errors.Is(err, ErrBadSignature) {
			t.Errorf("got %v, want ErrBadSignature", err)
		}
	})
	t.Run("registry unreachable", func(t *testing.T) {
		e2 := newEnv(t)
		r := e2.push(t, "p")
		e2.srv.Close()
		err := e2.verify(r, &abi.Verification{Keys: []string{pub}})
		if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrBadSignature) || errors.Is(err, ErrNoSignature) {
			t.Errorf("got %v, want ErrUnreachable only", err)
		}
	})
	t.Run("nothing to verify against", func(t *testing.T) {
		if err := e.verify(ref, &abi.Verification{}); !errors.Is(err, ErrPolicy) {
			t.Errorf("got %v, want ErrPolicy", err)
		}
	})
}

func TestLoadPrivateKey(t *testing.T) {
	key, _ := keyPair(t, "right")
	if _, err := LoadPrivateKey(key, []byte("right")); err != nil {
		t.Fatalf("right password: %v", err)
	}
	_, err := LoadPrivateKey(key, []byte("wrong"))
	if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "password") {
		t.Errorf("wrong password: got %v, want ErrKey naming %s and the password", err, key)
	}
	k384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	key384, _ := writeKey(t, k384, cosignPrivateKeyPEM, "pw")
	_, err = LoadPrivateKey(key384, []byte("pw"))
	if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "P-384") || !strings.Contains(err.Error(), key384) {
		t.Errorf("P-384 key: got %v, want ErrKey naming the curve and %s", err, key384)
	}
	k256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyOld, _ := writeKey(t, k256, cosignPrivateKeyPEM, "pw")
	if _, err := LoadPrivateKey(keyOld, []byte("pw")); err != nil {
		t.Errorf("an ENCRYPTED COSIGN PRIVATE KEY: %v", err)
	}
	_, pub := keyPair(t, "")
	if _, err := LoadPrivateKey(pub, nil); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "PUBLIC KEY") {
		t.Errorf("a public key as private key: got %v", err)
	}
}

func TestLoadNodePolicy(t *testing.T) {
	dir := t.TempDir()
	_, pub := keyPair(t, "")
	pubBytes, _ := os.ReadFile(pub)
	writeFile(t, filepath.Join(dir, "team.pub"), pubBytes)
	head := "apiVersion: wasmlet.dev/v1alpha1\nkind: PluginVerificationPolicy\n"
	for _, tc := range []struct {
		name, text string
		want       []string // substrings of the error; none means valid
	}{
		{"valid, relative key", head + "requireSignature: true\nverification:\n  keys: [team.pub]\n", nil},
		{"unknown field", head + "requireSignatures: true\n", []string{"requireSignatures"}},
		{"unknown nested field", head + "verification:\n  key: [team.pub]\n", []string{`"key"`}},
		{"wrong kind", "apiVersion: wasmlet.dev/v1alpha1\nkind: Policy\n", []string{"kind", "Policy"}},
		{"wrong apiVersion", "apiVersion: v1\nkind: PluginVerificationPolicy\n", []string{"apiVersion"}},
		{"missing key file", head + "verification:\n  keys: [team.pub, gone.pub]\n", []string{"verification.keys[1]", filepath.Join(dir, "gone.pub")}},
		{"keyless without root", head + "verification:\n  keyless: [{issuer: https://issuer, subject: a@b}]\n", []string{"verification.trustedRoot"}},
		{"keyless without subject", head + "verification:\n  keyless: [{issuer: https://issuer}]\n  trustedRoot: root.json\n", []string{"verification.keyless[0]", "subject"}},
		{"keyless bad regexp", head + "verification:\n  keyless: [{issuer: https://i, subjectRegExp: '('}]\n  trustedRoot: root.json\n", []string{"verification.keyless[0].subjectRegExp"}},
		{"keyless missing root file", head + "verification:\n  keyless: [{issuer: https://i, subject: a@b}]\n  trustedRoot: root.json\n", []string{"verification.trustedRoot", filepath.Join(dir, "root.json")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "policy.yaml")
			writeFile(t, path, []byte(tc.text))
			p, err := LoadNodePolicy(path)
			if tc.want == nil {
				if err != nil || !p.RequireSignature || p.File != path {
					t.Fatalf("got %+v, %v", p, err)
				}
				return
			}
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("got %v, want ErrPolicy", err)
			}
			for _, s := range append(tc.want, path) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

func TestVerifier_Verify(t *testing.T) {
	e := newEnv(t)
	nodeKey, nodePub := keyPair(t, "")
	pluginKey, pluginPub := keyPair(t, "")
	manifestDir := filepath.Dir(pluginPub)
	signedByNode := e.push(t, "p")
	e.sign(t, signedByNode, nodeKey, "")
	signedByBoth := e.push(t, "p")
	e.sign(t, signedByBoth, nodeKey, "")
	e.sign(t, signedByBoth, pluginKey, "")
	unsigned := e.push(t, "p")

	policy := func(t *testing.T, text string) *NodePolicy {
		path := filepath.Join(t.TempDir(), "policy.yaml")
		writeFile(t, path, []byte("apiVersion: wasmlet.dev/v1alpha1\nkind: PluginVerificationPolicy\n"+text))
		p, err := LoadNodePolicy(path)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	verifier := func(t *testing.T, p *NodePolicy) *Verifier {
		v, err := New(Config{Registry: e.client, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	own := &abi.Verification{Keys: []string{"cosign.pub"}} // relative to manifestDir
	ctx := context.Background()

	t.Run("no policy, nothing asked", func(t *testing.T) {
		if err := verifier(t, nil).Verify(ctx, unsigned, nil, manifestDir); err != nil {
			t.Errorf("got %v", err)
		}
	})
	t.Run("requireSignature, nothing configured", func(t *testing.T) {
		p := policy(t, "requireSignature: true\n")
		err := verifier(t, p).Verify(ctx, signedByBoth, nil, manifestDir)
		if !errors.Is(err, ErrSignatureRequired) || !strings.Contains(err.Error(), p.File) || !strings.Contains(err.Error(), signedByBoth.String()) {
			t.Errorf("got %v, want ErrSignatureRequired naming %s and the plugin", err, p.File)
		}
	})
	t.Run("requireSignature, the manifest's key", func(t *testing.T) {
		v := verifier(t, policy(t, "requireSignature: true\n"))
		if err := v.Verify(ctx, signedByBoth, own, manifestDir); err != nil {
			t.Errorf("signed by the manifest's key: %v", err)
		}
		if err := v.Verify(ctx, signedByNode, own, manifestDir); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "plugin manifest in "+manifestDir) {
			t.Errorf("signed by another key: got %v, want ErrBadSignature naming the manifest", err)
		}
	})
	t.Run("node key and the manifest's key both needed", func(t *testing.T) {
		p := policy(t, "verification:\n  keys: ["+nodePub+"]\n")
		v := verifier(t, p)
		if err := v.Verify(ctx, signedByBoth, own, manifestDir); err != nil {
			t.Errorf("signed by both: %v", err)
		}
		if err := v.Verify(ctx, signedByNode, own, manifestDir); !errors.Is(err, ErrBadSignature) {
			t.Errorf("signed by the node's key only: got %v, want ErrBadSignature", err)
		}
		if err := v.Verify(ctx, signedByNode, nil, manifestDir); err != nil {
			t.Errorf("signed by the node's key, nothing in the manifest: %v", err)
		}
		if err := v.Verify(ctx, unsigned, nil, manifestDir); !errors.Is(err, ErrNoSignature) {
			t.Errorf("unsigned: got %v, want ErrNoSignature", err)
		}
	})
	t.Run("a manifest's broken verification", func(t *testing.T) {
		err := verifier(t, nil).Verify(ctx, signedByBoth, &abi.Verification{Keys: []string{"gone.pub"}}, manifestDir)
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "verification.keys[0]") {
			t.Errorf("got %v, want ErrPolicy naming verification.keys[0]", err)
		}
	})
}
