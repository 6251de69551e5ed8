//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var registryEnvFlag = flag.String("registry-env", "", "the env file hack/registry/up.sh wrote; enables TestRegistryPlugins")

// TestRegistryPlugins runs an agent whose plugin directory holds a
// reference manifest (image: in a private registry with TLS and
// credentials): the plugin is pulled and enforced; a new version pushed to
// the same tag replaces it with no moment in which a pod both versions deny
// is admitted; with the registry stopped what is enforced stays and the
// failed re-resolutions show in /plugins; an agent restarted with the
// registry down enforces the cached digest; the registry back, the
// re-resolutions succeed again.
func TestRegistryPlugins(t *testing.T) {
	if *registryEnvFlag == "" {
		t.Skip("needs -registry-env (hack/e2e.sh starts the registry)")
	}
	env := harness.ReadRegistryEnv(t, *registryEnvFlag)
	regDir := filepath.Dir(*registryEnvFlag)
	cleanRuntime(t)
	t.Cleanup(func() { cleanRuntime(t) })
	ensurePlugins(t, pluginBuildDir(), "no-privileged", "image-allowlist")
	ref := env["REGISTRY"] + "/policies/node-policy:stable"
	push := harness.PushConfig{Wasmlet: flags.Wasmlet, Plugins: *pluginsFlag, Env: env}
	d1 := harness.PushPlugin(t, push, "no-privileged", ref)

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
	agentFlags := " --plugin-dir " + dir + " --plugin-resolve-interval 1s --plugin-registry-config " + env["REGISTRY_CONFIG"] + " --plugin-registry-ca " + env["REGISTRY_CA"]
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

	// A new version to the same tag: privileged pods keep arriving during
	// the move, and every one is denied — by one version or the other.
	d2 := harness.PushPlugin(t, push, "image-allowlist", ref)
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

	// The registry stops: the failed re-resolutions show, version 2 stays.
	registryScript(t, "down.sh", regDir)
	s = waitPlugin(t, a, "policy", "a failed re-resolution", func(s pluginStatus) bool { return s.LastResolveError != "" })
	if s.State != "loaded" || s.Digest != d2 || !strings.Contains(s.LastResolveError, ref) {
		t.Errorf("with the registry down: %+v, want version 2 serving and the error naming %s", s, ref)
	}
	denied("reg-outage", "denied by version 2 with the registry down")

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

// registryScript runs hack/registry/SCRIPT DIR.
func registryScript(t *testing.T, script, dir string) {
	t.Helper()
	if out, err := exec.Command(filepath.Join(flags.Hack, "registry", script), dir).CombinedOutput(); err != nil {
		t.Fatalf("hack/registry/%s: %v\n%s", script, err, out)
	}
}
