//go:build e2e

package e2eregistry

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var cosign = flag.String("cosign", "", "the cosign binary (hack/cosign/build.sh)")

// runCosign runs cosign with the registry's CA (SSL_CERT_FILE), its
// credentials (DOCKER_CONFIG, the directory of REGISTRY_CONFIG), a home of
// its own and the keys' password.
func runCosign(t *testing.T, r registry, args ...string) (int, string) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(*cosign, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+filepath.Dir(r.dockerConfig),
		"SSL_CERT_FILE="+r.ca, "COSIGN_PASSWORD=e2e-password", "COSIGN_YES=true")
	cmd.Dir = home
	code, stdout, stderr := runCmd(t, cmd)
	return code, stdout + stderr
}

// keyPair has cosign write a key pair into a new directory.
func keyPair(t *testing.T, r registry) (key, pub string) {
	t.Helper()
	dir := t.TempDir()
	code, out := runCosign(t, r, "generate-key-pair", "--output-key-prefix", filepath.Join(dir, "cosign"))
	if code != 0 {
		t.Fatalf("cosign generate-key-pair: exit %d\n%s", code, out)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// digestOf is what a wasmlet command printed after prefix: the REPO@sha256:…
// after "signed " or "verified ", the sha256:… after "pushed REF@".
func digestOf(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q line in %q", prefix, out)
	return ""
}

// TestSign signs with one tool and verifies with the other, both ways,
// against the real registry and the real cosign.
func TestSign(t *testing.T) {
	r := readEnv(t)
	if *cosign == "" {
		t.Skip("needs -cosign (run by hack/e2e.sh)")
	}
	manifest := filepath.Join(*repo, "build", "plugins", "deny-privileged.plugin.yaml")
	creds := []string{"--registry-config", r.dockerConfig, "--registry-ca", r.ca}
	key, pub := keyPair(t, r)
	_, wrongPub := keyPair(t, r)
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("e2e-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// push puts the plugin at ref with author as its config's author, so
	// that each case signs an artifact of its own digest.
	push := func(t *testing.T, ref, author string) string {
		code, out, errOut := run(t, append(append([]string{"plugin", "push"}, creds...), "--author", author, manifest, ref)...)
		if code != 0 {
			t.Fatalf("push: exit %d\n%s%s", code, out, errOut)
		}
		return digestOf(t, out, "pushed "+ref+"@")
	}
	wasmletVerify := func(t *testing.T, pubKey, ref string) (int, string, string) {
		return run(t, append(append([]string{"plugin", "verify"}, creds...), "--key", pubKey, ref)...)
	}

	t.Run("WasmletSignsCosignVerifies", func(t *testing.T) {
		ref := r.addr + "/policies/signed-by-wasmlet:1"
		digest := push(t, ref, "wasmlet-signs")
		code, out, errOut := run(t, append(append([]string{"plugin", "sign"}, creds...), "--key", key, "--password-file", pwFile, ref)...)
		if code != 0 {
			t.Fatalf("wasmlet plugin sign: exit %d\n%s%s", code, out, errOut)
		}
		signed := digestOf(t, out, "signed ")
		if !strings.HasSuffix(signed, "@"+digest) {
			t.Errorf("signed %s, pushed digest %s", signed, digest)
		}
		code, cout := runCosign(t, r, "verify", "--key", pub, "--insecure-ignore-tlog=true", signed)
		if code != 0 {
			t.Fatalf("cosign verify with the signing key: exit %d\n%s", code, cout)
		}
		if !strings.Contains(cout, digest) {
			t.Errorf("cosign verify printed no payload naming %s:\n%s", digest, cout)
		}
		if code, cout := runCosign(t, r, "verify", "--key", wrongPub, "--insecure-ignore-tlog=true", signed); code == 0 {
			t.Errorf("cosign verify with another key accepted:\n%s", cout)
		}
		// wasmlet reads its own signature too, by tag.
		if code, out, errOut := wasmletVerify(t, pub, ref); code != 0 || digestOf(t, out, "verified ") != signed {
			t.Errorf("wasmlet plugin verify: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("CosignSignsWasmletVerifies", func(t *testing.T) {
		ref := r.addr + "/policies/signed-by-cosign:1"
		digest := push(t, ref, "cosign-signs")
		byDigest := r.addr + "/policies/signed-by-cosign@" + digest
		code, cout := runCosign(t, r, "sign", "--key", key, "--tlog-upload=false", "--yes", byDigest)
		if code != 0 {
			t.Fatalf("cosign sign: exit %d\n%s", code, cout)
		}
		code, out, errOut := wasmletVerify(t, pub, ref)
		if code != 0 {
			t.Fatalf("wasmlet plugin verify with the signing key: exit %d\n%s%s", code, out, errOut)
		}
		if got := digestOf(t, out, "verified "); got != byDigest {
			t.Errorf("verified %s, want %s", got, byDigest)
		}
		code, _, errOut = wasmletVerify(t, wrongPub, ref)
		if code == 0 || !strings.Contains(errOut, "signature does not verify") || !strings.Contains(errOut, byDigest) {
			t.Errorf("wasmlet plugin verify with another key: exit %d, %s", code, errOut)
		}
	})

	t.Run("Unsigned", func(t *testing.T) {
		ref := r.addr + "/policies/unsigned:1"
		push(t, ref, "nobody-signs")
		code, _, errOut := wasmletVerify(t, pub, ref)
		if code == 0 || !strings.Contains(errOut, "no signature") || !strings.Contains(errOut, ref[:strings.LastIndex(ref, ":")]) {
			t.Errorf("wasmlet plugin verify of an unsigned plugin: exit %d, %s", code, errOut)
		}
	})
}
