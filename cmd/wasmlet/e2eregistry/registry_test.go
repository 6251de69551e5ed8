//go:build e2e

package e2eregistry

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

var (
	registryEnv = flag.String("registry-env", "", "the env file hack/registry/up.sh wrote")
	wasmlet     = flag.String("wasmlet", "", "the wasmlet binary")
	repo        = flag.String("repo", "../../..", "the repository root (build/plugins, examples/plugins)")
)

// registry is what hack/registry/up.sh wrote into its env file.
type registry struct {
	addr, ca, dockerConfig, user, password string
}

func readEnv(t *testing.T) registry {
	t.Helper()
	if *registryEnv == "" || *wasmlet == "" {
		t.Skip("needs -registry-env and -wasmlet (run by hack/e2e.sh)")
	}
	f, err := os.Open(*registryEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			env[k] = v
		}
	}
	r := registry{addr: env["REGISTRY"], ca: env["REGISTRY_CA"], dockerConfig: env["REGISTRY_CONFIG"],
		user: env["REGISTRY_USER"], password: env["REGISTRY_PASSWORD"]}
	if r.addr == "" || r.ca == "" || r.dockerConfig == "" {
		t.Fatalf("%s: REGISTRY, REGISTRY_CA or REGISTRY_CONFIG missing", *registryEnv)
	}
	return r
}

// run runs the binary with no credentials of the user's: HOME and
// DOCKER_CONFIG point at an empty directory.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(*wasmlet, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home, "SOURCE_DATE_EPOCH=1767225600")
	return runCmd(t, cmd)
}

// runCmd runs cmd and returns its exit status, stdout and stderr.
func runCmd(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func TestRegistry(t *testing.T) {
	r := readEnv(t)
	plugins := filepath.Join(*repo, "build", "plugins")
	manifest := filepath.Join(plugins, "deny-privileged.plugin.yaml")
	tests := filepath.Join(*repo, "examples", "plugins", "deny-privileged", "tests")
	ref := r.addr + "/policies/deny-privileged:0.1.0"
	creds := []string{"--registry-config", r.dockerConfig, "--registry-ca", r.ca}

	t.Run("PushPull", func(t *testing.T) {
		code, out, errOut := run(t, append(append([]string{"plugin", "push"}, creds...), "--tests", tests, manifest, ref)...)
		if code != 0 {
			t.Fatalf("push: exit %d\n%s%s", code, out, errOut)
		}
		t.Log(strings.TrimSpace(out))
		dst := filepath.Join(t.TempDir(), "pulled")
		code, out, errOut = run(t, append(append([]string{"plugin", "pull"}, creds...), ref, dst)...)
		if code != 0 {
			t.Fatalf("pull: exit %d\n%s%s", code, out, errOut)
		}
		want := map[string]string{
			"deny-privileged.wasm":        filepath.Join(plugins, "deny-privileged.wasm"),
			"deny-privileged.plugin.yaml": manifest,
		}
		cases, _ := filepath.Glob(filepath.Join(tests, "*.yaml"))
		if len(cases) == 0 {
			t.Fatalf("no fixtures in %s", tests)
		}
		for _, c := range cases {
			want[filepath.Join("tests", filepath.Base(c))] = c
		}
		var got []string
		filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dst, p)
				got = append(got, rel)
			}
			return nil
		})
		if len(got) != len(want) {
			t.Errorf("pulled %v, want the %d files %v", got, len(want), want)
		}
		for rel, src := range want {
			a, _ := os.ReadFile(src)
			b, err := os.ReadFile(filepath.Join(dst, rel))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s: not the bytes of %s (%v)", rel, src, err)
			}
		}
	})

	// The spec's media types, then wasmlet's own (README, "Plugins in a
	// registry").
	t.Run("MediaTypes", func(t *testing.T) {
		const (
			manifestType = "application/vnd.wasmlet.plugin.manifest.v1+yaml"
			testType     = "application/vnd.wasmlet.plugin.test.v1+yaml"
		)
		nref, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		auth := authn.FromConfig(authn.AuthConfig{Username: r.user, Password: r.password})
		desc, err := remote.Get(nref, remote.WithAuth(auth), remote.WithTransport(caTransport(t, r.ca)))
		if err != nil {
			t.Fatal(err)
		}
		m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.wasm.config.v0+json" {
			t.Errorf("manifest %s, config %s", m.MediaType, m.Config.MediaType)
		}
		if len(m.Layers) < 2 || m.Layers[0].MediaType != "application/wasm" || m.Layers[1].MediaType != manifestType {
			t.Fatalf("layers %+v", m.Layers)
		}
		for i, l := range m.Layers[2:] {
			if l.MediaType != testType {
				t.Errorf("layer %d: %s", i+2, l.MediaType)
			}
		}
		if m.Layers[0].Annotations["org.opencontainers.image.title"] != "deny-privileged.wasm" {
			t.Errorf("module layer annotations %v", m.Layers[0].Annotations)
		}
	})

	t.Run("NoCredentials", func(t *testing.T) {
		noAuth := filepath.Join(t.TempDir(), "config.json")
		os.WriteFile(noAuth, []byte(`{"auths":{}}`), 0o600)
		other := r.addr + "/policies/unauthorized:1"
		code, _, errOut := run(t, "plugin", "push", "--registry-config", noAuth, "--registry-ca", r.ca, manifest, other)
		if code == 0 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, other) || !strings.Contains(errOut, "credentials") {
			t.Errorf("push without credentials: exit %d, %s", code, errOut)
		}
		code, _, errOut = run(t, "plugin", "pull", "--registry-ca", r.ca, ref, filepath.Join(t.TempDir(), "x"))
		if code == 0 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, ref) {
			t.Errorf("pull without credentials: exit %d, %s", code, errOut)
		}
	})

	t.Run("UntrustedCA", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "x")
		code, _, errOut := run(t, "plugin", "pull", "--registry-config", r.dockerConfig, ref, dst)
		if code == 0 || !strings.Contains(errOut, "--registry-ca") {
			t.Errorf("pull without the CA: exit %d, %s", code, errOut)
		}
		if _, err := os.Stat(dst); !os.IsNotExist(err) {
			t.Errorf("%s written by a failed pull", dst)
		}
	})
}

// caTransport trusts the registry's certificate.
func caTransport(t *testing.T, caFile string) http.RoundTripper {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s: no certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return tr
}
