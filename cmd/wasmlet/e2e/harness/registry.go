package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
