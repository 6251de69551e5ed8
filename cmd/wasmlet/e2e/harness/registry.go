package harness

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wasmlet/wasmlet/abi"
)

// ReadRegistryEnv reads the env file hack/registry/up.sh wrote (REGISTRY,
// REGISTRY_CA, REGISTRY_CONFIG, REGISTRY_USER, REGISTRY_PASSWORD); a
// missing key fails the test.
func ReadRegistryEnv(t testing.TB, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"REGISTRY", "REGISTRY_CA", "REGISTRY_CONFIG", "REGISTRY_USER", "REGISTRY_PASSWORD"} {
		if env[k] == "" {
			t.Fatalf("%s: %s missing", path, k)
		}
	}
	return env
}

// PushConfig is what PushPlugin needs.
type PushConfig struct {
	// Wasmlet is the wasmlet binary.
	Wasmlet string
	// Plugins is the directory of built plugins (NAME.wasm, NAME.plugin.yaml).
	Plugins string
	// Env is the registry's env (ReadRegistryEnv).
	Env map[string]string
}

// PushPlugin pushes the built plugin name to ref with `wasmlet plugin push`
// (extra flags before the arguments) and returns the digest it printed.
// The creation time is fixed: the same plugin pushed twice is the same
// digest (a reproducible build).
func PushPlugin(t testing.TB, c PushConfig, name, ref string, extra ...string) string {
	t.Helper()
	src := t.TempDir()
	for _, f := range []string{name + ".wasm", name + abi.ManifestSuffix} {
		b, err := os.ReadFile(filepath.Join(c.Plugins, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"plugin", "push", "--registry-config", c.Env["REGISTRY_CONFIG"], "--registry-ca", c.Env["REGISTRY_CA"]}, extra...)
	cmd := exec.Command(c.Wasmlet, append(args, src, ref)...)
	cmd.Env = append(os.Environ(), "HOME="+src, "DOCKER_CONFIG="+src, "SOURCE_DATE_EPOCH=1700000000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wasmlet plugin push %s: %v\n%s", ref, err, out)
	}
	i := strings.Index(string(out), "sha256:")
	if i < 0 || len(out) < i+71 {
		t.Fatalf("wasmlet plugin push printed no digest: %s", out)
	}
	return string(out[i : i+71])
}

// Testbox is the testbox workload as an image a registry can serve: the
// image tarball hack/lib/e2e.sh built for containerd, or testbox.wasm as a
// Wasm OCI artifact (config application/vnd.wasm.config.v0+json, the module
// one layer of type application/wasm) for the embedded runtime.
type Testbox struct {
	// Env is the registry's env (ReadRegistryEnv): its CA and credentials.
	Env map[string]string
	// Runtime is the runtime under test: "embedded" pushes Wasm, any
	// other the image tarball.
	Runtime string
	// Wasm is testbox.wasm (for the embedded runtime).
	Wasm string
	// Tarball is testbox.tar (for containerd).
	Tarball string
}

// Push pushes testbox to each ref with the registry's credentials.
func (b Testbox) Push(t testing.TB, refs ...string) {
	t.Helper()
	var img ggcrv1.Image
	var err error
	if b.Runtime == "embedded" {
		mod, rerr := os.ReadFile(b.Wasm)
		if rerr != nil {
			t.Fatalf("testbox.wasm: %v", rerr)
		}
		img, err = mutate.AppendLayers(empty.Image, static.NewLayer(mod, "application/wasm"))
		if err == nil {
			img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), "application/vnd.wasm.config.v0+json")
		}
	} else {
		img, err = tarball.ImageFromPath(b.Tarball, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(b.Env["REGISTRY_CA"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	auth := &authn.Basic{Username: b.Env["REGISTRY_USER"], Password: b.Env["REGISTRY_PASSWORD"]}
	for _, ref := range refs {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(r, img, remote.WithAuth(auth), remote.WithTransport(tr)); err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
	}
}
