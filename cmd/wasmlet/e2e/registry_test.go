//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var (
	registryEnvFlag = flag.String("registry-env", "", "the env file hack/registry/up.sh wrote; enables TestRegistryPlugins")
	cosignFlag      = flag.String("cosign", "", "the cosign binary (hack/cosign/build.sh), which makes TestRegistryPlugins' signing key")
)

// TestRegistryPlugins runs an agent whose plugin directory holds a
// reference manifest (image: in a private registry with TLS and
// credentials) and whose node policy requires every remote plugin to be
// signed with the team's cosign key: the signed plugin is pulled, verified
// and enforced; an unsigned version pushed to the tag, and a tampered one
// (carrying the first version's signature), are refused with the old
// version enforced throughout; the new version, once signed, replaces it
// with no moment in which a pod both versions deny is admitted; with the
// registry stopped for 30 re-resolutions what is enforced stays and the
// failed re-resolutions show in /plugins and the metric; an agent restarted with the registry down enforces the
// cached digest; the registry back, the re-resolutions succeed again.
func TestRegistryPlugins(t *testing.T) {
	if *registryEnvFlag == "" || *cosignFlag == "" {
		t.Skip("needs -registry-env and -cosign (hack/e2e.sh starts the registry and builds cosign)")
	}
	env := readRegistryEnv(t)
	regDir := filepath.Dir(*registryEnvFlag)
	cleanRuntime(t)
	t.Cleanup(func() { cleanRuntime(t) })
	ensurePlugins(t, pluginBuildDir(), "no-privileged", "image-allowlist")
	key, pub := cosignKeyPair(t)
	// A repository of this run's own: the suites of both runtimes share
	// the registry, and a plugin pushed twice is the same digest.
	repo := env["REGISTRY"] + "/policies/node-policy-" + flags.Runtime
	ref := repo + ":stable"
	d1 := pushPlugin(t, env, "no-privileged", ref)
	signPlugin(t, env, key, repo+"@"+d1)

	a := newAgent(t, "registry-plugins", flags.Endpoint)
	dir := filepath.Join(a.Dir, "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Both versions read their settings from the node's config: the first
	// (no-privileged) denies privileged pods, the second (image-allowlist)
	// every pod, as no image comes from registry.example.invalid.
	refManifest := abi.Manifest{Name: "policy", Image: ref,
		Config:      map[string]string{"denyPrivileged": "true", "denyHostNamespaces": "false", "exemptNamespaces": "kube-system", "allowed": "registry.example.invalid"},
		Permissions: abi.Permissions{MemoryPages: 512, Timeout: abi.Duration{Duration: 250 * time.Millisecond}}}
	b, err := yaml.Marshal(refManifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy"+abi.ManifestSuffix), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The node requires a signature of every remote plugin, by the team's
	// key; the reference manifest names none of its own.
	policy := filepath.Join(a.Dir, "plugin-policy.yaml")
	policyYAML := "apiVersion: wasmlet.dev/v1alpha1\nkind: PluginVerificationPolicy\nrequireSignature: true\nverification:\n  keys: [" + pub + "]\n"
	if err := os.WriteFile(policy, []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	agentFlags := " --plugin-dir " + dir + " --plugin-resolve-interval 1s --plugin-registry-config " + env["REGISTRY_CONFIG"] + " --plugin-registry-ca " + env["REGISTRY_CA"] +
		" --plugin-verification-policy " + policy
	start := func() {
		saved := *agentFlagsFlag
		*agentFlagsFlag = strings.TrimSpace(saved + agentFlags)
		a.start(t)
		*agentFlagsFlag = saved
	}
	start()
	t.Cleanup(func() { a.Stop(t) })
	a.diagnose(t)

	s := waitPlugin(t, a, "policy", "version 1 pulled and loaded", func(s pluginStatus) bool { return s.State == "loaded" && s.Digest == d1 })
	if !s.Verified || s.Image != ref {
		t.Errorf("/plugins for the pulled plugin: %+v, want verified, image %s", s, ref)
	}
	a.Write(t, "reg-plain.yaml", newPod("reg-plain", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	a.Write(t, "reg-priv.yaml", privileged("reg-priv"))
	a.waitRunning(t, "reg-plain", 2*time.Minute)
	a.waitPod(t, "reg-priv", time.Minute, "denied by version 1", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Privileged" && strings.Contains(p.Status.Message, "policy")
	})
	a.Remove(t, "reg-plain.yaml")
	a.Remove(t, "reg-priv.yaml")
	a.waitGone(t, "reg-plain", time.Minute)

	// Version 1 stays enforced while the tag names what the node must
	// refuse: a plain pod runs (version 2 would deny it), a privileged one
	// is denied.
	enforcedV1 := func(name string) {
		t.Helper()
		a.Write(t, name+"-plain.yaml", newPod(name+"-plain", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
		a.Write(t, name+"-priv.yaml", privileged(name+"-priv"))
		a.waitRunning(t, name+"-plain", 2*time.Minute)
		a.waitPod(t, name+"-priv", time.Minute, "denied by version 1", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Privileged"
		})
		a.Remove(t, name+"-plain.yaml")
		a.Remove(t, name+"-priv.yaml")
		a.waitGone(t, name+"-plain", time.Minute)
	}
	// Unsigned: refused, naming the missing signature.
	d2 := pushPlugin(t, env, "image-allowlist", ref)
	s = waitPlugin(t, a, "policy", "the unsigned version refused", func(s pluginStatus) bool {
		return strings.Contains(s.LastResolveError, "no signature") && strings.Contains(s.LastResolveError, d2)
	})
	if s.Digest != d1 || s.State != "loaded" {
		t.Errorf("with an unsigned version at the tag: %+v, want version 1 serving", s)
	}
	enforcedV1("reg-unsigned")
	// Tampered: another artifact at the tag carrying version 1's signature
	// (a signature over another digest).
	d3 := pushPlugin(t, env, "no-privileged", ref, "--author", "someone-else")
	copySignature(t, env, repo, d1, d3)
	s = waitPlugin(t, a, "policy", "the tampered version refused", func(s pluginStatus) bool {
		return strings.Contains(s.LastResolveError, "signature over another digest") && strings.Contains(s.LastResolveError, d3)
	})
	if s.Digest != d1 || s.State != "loaded" {
		t.Errorf("with a tampered version at the tag: %+v, want version 1 serving", s)
	}
	enforcedV1("reg-tampered")

	// A new version to the same tag, signed: privileged pods keep arriving
	// during the move, and every one is denied — by one version or the
	// other.
	if d := pushPlugin(t, env, "image-allowlist", ref); d != d2 {
		t.Fatalf("version 2 pushed again: %s, want the same digest %s", d, d2)
	}
	signPlugin(t, env, key, repo+"@"+d2)
	var during []string
	harness.Eventually(t, time.Minute, "version 2 serving", func() (bool, string) {
		name := fmt.Sprintf("reg-move-%d", len(during))
		a.Write(t, name+".yaml", privileged(name))
		during = append(during, name)
		ps, err := a.plugins()
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.Name == "policy" {
				return p.Digest == d2, fmt.Sprintf("%+v", p)
			}
		}
		return false, "policy not listed"
	})
	for _, name := range during {
		p := a.waitPod(t, name, time.Minute, "denied during the move", func(p *v1.Pod) bool { return p.Status.Phase != "" && p.Status.Phase != v1.PodPending })
		if p.Status.Phase != v1.PodFailed {
			t.Errorf("pod %s, privileged, written during the move: %s", name, harness.PodSummary(p))
		}
		a.Remove(t, name+".yaml")
	}
	t.Logf("%d privileged pods written during the move, all denied", len(during))
	denied := func(name, what string) {
		t.Helper()
		a.Write(t, name+".yaml", newPod(name, v1.RestartPolicyAlways, box("main", "sleep", "inf")))
		a.waitPod(t, name, time.Minute, what, func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed && p.Status.Reason == "ImageNotAllowed"
		})
		a.Remove(t, name+".yaml")
	}
	denied("reg-v2", "denied by version 2")

	// The registry stops for at least 30 re-resolutions (30 s at the 1 s
	// interval): they fail and show, and version 2 stays enforced.
	fetchErrors := func() float64 {
		v, err := a.Metric("wasmlet_plugin_fetch_errors_total", `plugin="policy"`)
		if err != nil && !errors.Is(err, harness.ErrNoMetric) {
			t.Fatal(err)
		}
		return v
	}
	before := fetchErrors()
	registryScript(t, "down.sh", regDir)
	s = waitPlugin(t, a, "policy", "a failed re-resolution", func(s pluginStatus) bool { return s.LastResolveError != "" })
	if s.State != "loaded" || s.Digest != d2 || !strings.Contains(s.LastResolveError, ref) {
		t.Errorf("with the registry down: %+v, want version 2 serving and the error naming %s", s, ref)
	}
	denied("reg-outage", "denied by version 2 with the registry down")
	harness.Eventually(t, 3*time.Minute, "30 failed re-resolutions with the registry down", func() (bool, string) {
		n := fetchErrors() - before
		return n >= 30, fmt.Sprintf("%v failed", n)
	})
	if s := waitPlugin(t, a, "policy", "version 2 still serving", func(s pluginStatus) bool { return true }); s.State != "loaded" || s.Digest != d2 {
		t.Errorf("after 30 failed re-resolutions: %+v, want version 2 serving", s)
	}
	denied("reg-outage-30", "denied by version 2 after 30 failed re-resolutions")

	// The agent restarts with the registry down: the cached digest loads.
	a.Stop(t)
	start()
	s = waitPlugin(t, a, "policy", "version 2 from the cache", func(s pluginStatus) bool { return s.State == "loaded" && s.Digest == d2 })
	denied("reg-restart", "denied by the cached version 2")

	// The registry is back on the same port: re-resolutions succeed.
	registryScript(t, "up.sh", regDir)
	waitPlugin(t, a, "policy", "re-resolution after the outage", func(s pluginStatus) bool { return s.LastResolveError == "" && s.ResolvedDigest == d2 })
}

// privileged is a pod with a privileged container.
func privileged(name string) *v1.Pod {
	p := newPod(name, v1.RestartPolicyAlways, box("main", "sleep", "inf"))
	yes := true
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &yes}
	return p
}

// readRegistryEnv reads the env file hack/registry/up.sh wrote.
func readRegistryEnv(t *testing.T) map[string]string {
	return harness.ReadRegistryEnv(t, *registryEnvFlag)
}

// cosignKeyPair has cosign write a key pair (password e2e-password) into
// a new directory.
func cosignKeyPair(t *testing.T) (key, pub string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(*cosignFlag, "generate-key-pair", "--output-key-prefix", filepath.Join(dir, "cosign"))
	cmd.Env = append(os.Environ(), "HOME="+dir, "COSIGN_PASSWORD=e2e-password")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
}

// signPlugin signs ref with `wasmlet plugin sign`.
func signPlugin(t *testing.T, env map[string]string, key, ref string) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(flags.Wasmlet, "plugin", "sign", "--key", key, "--registry-config", env["REGISTRY_CONFIG"], "--registry-ca", env["REGISTRY_CA"], ref)
	cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home, "COSIGN_PASSWORD=e2e-password")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wasmlet plugin sign %s: %v\n%s", ref, err, out)
	}
}

// copySignature puts the signature image of repo@from under the signature
// tag of repo@to (cosign's sha256-<hex>.sig), as someone who swapped an
// artifact and kept the old signature would.
func copySignature(t *testing.T, env map[string]string, repo, from, to string) {
	t.Helper()
	ca, err := os.ReadFile(env["REGISTRY_CA"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	opts := []crane.Option{crane.WithTransport(tr), crane.WithAuth(&authn.Basic{Username: env["REGISTRY_USER"], Password: env["REGISTRY_PASSWORD"]})}
	sigTag := func(d string) string { return repo + ":" + strings.Replace(d, ":", "-", 1) + ".sig" }
	if err := crane.Copy(sigTag(from), sigTag(to), opts...); err != nil {
		t.Fatalf("copy the signature of %s to %s: %v", from, to, err)
	}
}

// pushPlugin pushes the built plugin name to ref with `wasmlet plugin push`
// (extra flags before the arguments) and returns the digest it printed.
func pushPlugin(t *testing.T, env map[string]string, name, ref string, extra ...string) string {
	t.Helper()
	return harness.PushPlugin(t, harness.PushConfig{Wasmlet: flags.Wasmlet, Plugins: *pluginsFlag, Env: env}, name, ref, extra...)
}

// registryScript runs hack/registry/SCRIPT DIR.
func registryScript(t *testing.T, script, dir string) {
	t.Helper()
	if out, err := exec.Command(filepath.Join(flags.Hack, "registry", script), dir).CombinedOutput(); err != nil {
		t.Fatalf("hack/registry/%s: %v\n%s", script, err, out)
	}
}
