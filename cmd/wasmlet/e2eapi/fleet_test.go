//go:build e2e_apiserver

package e2eapi

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
)

var (
	registryEnvFlag = flag.String("registry-env", "", "the env file hack/registry/up.sh wrote; enables TestFleet")
	pluginsFlag     = flag.String("plugins", "", "the built plugins no-privileged, image-allowlist and validator (hack/build-plugins.sh)")
	deployFlag      = flag.String("deploy", "../../../deploy", "the CRDs, RBAC and policy to apply")
)

// TestFleet: the plugins of a node from the API server. deploy/ applied
// with kubectl, a WasmletPlugin applied puts a plugin pulled from a private
// registry on the node, which enforces it; a new image moves the node to
// the new digest with every privileged pod of the move denied; monitor →
// enforce changes the verdict; a WasmletPlugin the node cannot verify, or
// whose config the plugin refuses, leaves the previous version enforced and
// the error in its WasmletNode; with the API server stopped, and after an
// agent restart without it (the refused declaration on disk), the last
// version that loaded stays enforced; a selector that does not match never loads, until
// the node's labels come to match it, and it is dropped when they stop
// matching; kubectl delete takes it off.
// The node works with its own credentials and the RBAC of deploy/ only,
// and writes no WasmletNode but its own.
func TestFleet(t *testing.T) {
	if *registryEnvFlag == "" || *pluginsFlag == "" || *kubectlFlag == "" {
		t.Skip("needs -registry-env, -plugins and -kubectl (hack/e2e-apiserver.sh)")
	}
	env := harness.ReadRegistryEnv(t, *registryEnvFlag)
	dyn, err := dynamic.NewForConfig(adminConfig)
	if err != nil {
		t.Fatal(err)
	}
	plugins, reports := dyn.Resource(pluginsv1.WasmletPlugins), dyn.Resource(pluginsv1.WasmletNodes)

	if r := kubectl(t, time.Minute, "", "apply", "-f", *deployFlag); r.code != 0 {
		t.Fatalf("kubectl apply -f deploy/: %s%s", r.stdout, r.stderr)
	}
	if r := kubectl(t, time.Minute, "", "wait", "--for", "condition=established", "crd/wasmletplugins.wasmlet.dev", "crd/wasmletnodes.wasmlet.dev"); r.code != 0 {
		t.Fatalf("CRDs not established: %s%s", r.stdout, r.stderr)
	}

	// Bad input is refused by the API server, naming the field.
	for _, c := range []struct{ name, yaml, want string }{
		{"bad image", wplugin("bad-image", "no-tag-or-registry", ""), "image: want REGISTRY/REPOSITORY:TAG"},
		{"unknown field", wplugin("unknown", env["REGISTRY"]+"/p/x:v1", "  colour: blue\n"), "unknown field"},
		{"bad mode", wplugin("bad-mode", env["REGISTRY"]+"/p/x:v1", "  mode: sometimes\n"), "mode: want enforce or monitor"},
	} {
		r := kubectl(t, time.Minute, c.yaml, "apply", "--validate=strict", "-f", "-")
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: kubectl apply exit %d, stderr %q; want refused with %q", c.name, r.code, r.stderr, c.want)
		}
	}

	v1ref, v2ref := env["REGISTRY"]+"/fleet/policy:v1", env["REGISTRY"]+"/fleet/policy:v2"
	push := harness.PushConfig{Wasmlet: flags.Wasmlet, Plugins: *pluginsFlag, Env: env}
	d1 := harness.PushPlugin(t, push, "no-privileged", v1ref)
	d2 := harness.PushPlugin(t, push, "image-allowlist", v2ref)

	a := newAgentOn(t, filepath.Join(flags.Base, "fleet-agent"), flags.Endpoint)
	pluginDir := filepath.Join(a.Dir, "plugins")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--node-name", *nodeFlag,
		"--kubeconfig", filepath.Join(*clusterFlag, "node-"+*nodeFlag+".kubeconfig"),
		"--port", strconv.Itoa(a.apiPort), "--client-ca-file", filepath.Join(*clusterFlag, "pki", "ca.crt"),
		"--container-runtime-endpoint", flags.Endpoint, "--log-level", "debug",
		"--plugin-dir", pluginDir, "--plugin-resolve-interval", "2s",
		"--plugin-registry-config", env["REGISTRY_CONFIG"], "--plugin-registry-ca", env["REGISTRY_CA"]}
	a.Start(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wasmlet log tail:\n%s", a.LogTail(80))
		}
		a.Stop(t)
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		plugins.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	entry := func() (pluginsv1.PluginStatus, bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		u, err := reports.Get(ctx, *nodeFlag, metav1.GetOptions{})
		if err != nil {
			return pluginsv1.PluginStatus{}, false, err.Error()
		}
		var n pluginsv1.WasmletNode
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
			return pluginsv1.PluginStatus{}, false, err.Error()
		}
		for _, ps := range n.Status.Plugins {
			if ps.Name == "policy" && ps.Source == pluginsv1.SourceAPI {
				return ps, true, fmt.Sprintf("%+v", ps)
			}
		}
		return pluginsv1.PluginStatus{}, false, fmt.Sprintf("no policy in %+v", n.Status)
	}
	waitEntry := func(what string, cond func(pluginsv1.PluginStatus) bool) pluginsv1.PluginStatus {
		t.Helper()
		var got pluginsv1.PluginStatus
		harness.Eventually(t, 2*time.Minute, "WasmletNode: "+what, func() (bool, string) {
			ps, ok, s := entry()
			got = ps
			return ok && cond(ps), s
		})
		return got
	}
	apply := func(yaml string) {
		t.Helper()
		if r := kubectl(t, time.Minute, yaml, "apply", "-f", "-"); r.code != 0 {
			t.Fatalf("kubectl apply: %s%s", r.stdout, r.stderr)
		}
	}
	const cfg = "  config:\n    denyPrivileged: \"true\"\n    denyHostNamespaces: \"false\"\n    exemptNamespaces: kube-system\n    allowed: registry.example.invalid\n" +
		"  permissions:\n    memoryPages: 512\n    timeout: 250ms\n"
	n := 0
	pod := func(priv bool) string {
		n++
		p := newPod(fmt.Sprintf("fleet-%d", n), "sleep", "inf")
		if priv {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
		}
		ctx, cancel := ctxT(10 * time.Second)
		defer cancel()
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			admin.CoreV1().Pods("default").Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		})
		return p.Name
	}
	deniedWith := func(name, reason string) {
		t.Helper()
		waitPod(t, "default", name, 2*time.Minute, "denied ("+reason+")", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed && p.Status.Reason == reason
		})
	}
	runs := func(name string) {
		t.Helper()
		waitPod(t, "default", name, 2*time.Minute, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}

	// A selector that matches no node: never loaded; fleet status says so.
	apply(wplugin("elsewhere", v1ref, cfg+"  nodeSelector:\n    matchLabels:\n      pool: nowhere\n"))

	// kubectl apply → enforced on the node.
	applied := time.Now()
	apply(wplugin("policy", v1ref, cfg))
	ps := waitEntry("policy v1 enforced", func(ps pluginsv1.PluginStatus) bool { return ps.Enforced && ps.Digest == d1 })
	toEnforced := time.Since(applied)
	if ps.Version == "" || ps.Mode != abi.ModeEnforce || ps.Error != "" || ps.ObservedGeneration != 1 {
		t.Errorf("report for v1: %+v", ps)
	}
	deniedWith(pod(true), "Privileged")
	t.Logf("FIGURE time from kubectl apply of a WasmletPlugin to enforced on the node (in its WasmletNode): %s", toEnforced.Round(10*time.Millisecond))

	// A new image: the node moves to its digest; privileged pods created
	// during the move are denied by one version or the other.
	apply(wplugin("policy", v2ref, cfg))
	var during []string
	harness.Eventually(t, 2*time.Minute, "policy v2 enforced", func() (bool, string) {
		during = append(during, pod(true))
		ps, ok, s := entry()
		return ok && ps.Enforced && ps.Digest == d2, s
	})
	for _, name := range during {
		p := waitPod(t, "default", name, 2*time.Minute, "denied during the move", func(p *v1.Pod) bool { return p.Status.Phase != "" && p.Status.Phase != v1.PodPending })
		if p.Status.Phase != v1.PodFailed {
			t.Errorf("pod %s, privileged, created during the move: %s", name, harness.PodSummary(p))
		}
	}
	t.Logf("%d privileged pods created during the move, all denied", len(during))
	deniedWith(pod(false), "ImageNotAllowed")

	// monitor → enforce changes the verdict.
	apply(wplugin("policy", v2ref, cfg+"  mode: monitor\n"))
	waitEntry("monitor", func(ps pluginsv1.PluginStatus) bool { return ps.Mode == abi.ModeMonitor && ps.Digest == d2 })
	runs(pod(false))
	apply(wplugin("policy", v2ref, cfg+"  mode: enforce\n"))
	waitEntry("enforce", func(ps pluginsv1.PluginStatus) bool { return ps.Mode == abi.ModeEnforce && ps.Digest == d2 })
	deniedWith(pod(false), "ImageNotAllowed")

	// A rollout spread: a change waits for the node's turn (a day away at
	// most), the previous version still enforced and the wait reported;
	// the same change without the spread is taken up at once.
	apply(wplugin("policy", v1ref, cfg+"  rollout:\n    spread: 24h\n"))
	ps = waitEntry("the change waits for the node's turn", func(ps pluginsv1.PluginStatus) bool { return ps.WaitingUntil != nil })
	if !ps.Enforced || ps.Digest != d2 || ps.ObservedGeneration != 4 {
		t.Errorf("while the change waits: %+v, want v2 (%s) at generation 4 still enforced", ps, d2)
	}
	deniedWith(pod(false), "ImageNotAllowed")
	if out, err := exec.Command(flags.Wasmlet, "fleet", "status", "--kubeconfig", filepath.Join(*clusterFlag, "admin.kubeconfig")).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "1 node(s) wait for their turn in the rollout spread") {
		t.Errorf("wasmlet fleet status while the change waits: %v\n%s", err, out)
	}
	apply(wplugin("policy", v1ref, cfg))
	waitEntry("v1 taken up at once without the spread", func(ps pluginsv1.PluginStatus) bool {
		return ps.Enforced && ps.Digest == d1 && ps.WaitingUntil == nil
	})
	apply(wplugin("policy", v2ref, cfg))
	waitEntry("back to v2", func(ps pluginsv1.PluginStatus) bool { return ps.Enforced && ps.Digest == d2 })

	// Verification the node cannot pass (v1 signed by nobody): the
	// previous version stays enforced, the error is in the report.
	key := "    - |\n      " + strings.ReplaceAll(strings.TrimSpace(publicKeyPEM(t)), "\n", "\n      ") + "\n"
	apply(wplugin("policy", v1ref, cfg+"  verification:\n    keys:\n"+key))
	ps = waitEntry("verification error reported", func(ps pluginsv1.PluginStatus) bool { return ps.Error != "" && ps.ObservedGeneration >= 8 })
	if !ps.Enforced || ps.Digest != d2 || !strings.Contains(ps.Error, v1ref) {
		t.Errorf("after a refused version: %+v, want v2 (%s) still enforced and the error naming %s", ps, d2, v1ref)
	}
	deniedWith(pod(false), "ImageNotAllowed")
	t.Logf("refused version reported: %s", ps.Error)

	// A config the plugin refuses (allowed left out; image-allowlist's
	// wasmlet_check_config): the previous version and config stay
	// enforced, the refusal is in the report, naming the plugin.
	noAllowed := strings.Replace(cfg, "    allowed: registry.example.invalid\n", "", 1)
	if noAllowed == cfg {
		t.Fatal("the config has no allowed line to leave out")
	}
	const refusal = `plugin "policy": config refused by the plugin: config allowed is not set`
	apply(wplugin("policy", v2ref, noAllowed))
	ps = waitEntry("config refusal reported", func(ps pluginsv1.PluginStatus) bool {
		return strings.Contains(ps.Error, refusal) && ps.ObservedGeneration >= 9
	})
	if !ps.Enforced || ps.Digest != d2 {
		t.Errorf("after a refused config: %+v, want v2 (%s) still enforced", ps, d2)
	}
	deniedWith(pod(false), "ImageNotAllowed")
	t.Logf("refused config reported: %s", ps.Error)

	// The API server goes away: what is enforced stays, and the agent
	// restarted without it enforces what it last verified (the
	// materialized reference manifest and the digest cache) and loaded:
	// the refused declaration is on disk, its last good version serves.
	servingV2 := func(what string) {
		t.Helper()
		harness.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			ps, err := a.servingPlugins()
			return err == nil && ps["policy"] == d2, fmt.Sprint(ps, err)
		})
	}
	cluster(t, "stop-apiserver")
	servingV2("policy v2 serving with the API server down")
	a.Stop(t)
	a.Start(t, args...)
	servingV2("policy v2 serving after an agent restart with the API server down")
	cluster(t, "start-apiserver")
	servingV2("policy v2 serving with the API server back")
	deniedWith(pod(false), "ImageNotAllowed")

	// kubectl get shows the report.
	r := kubectl(t, time.Minute, "", "get", "wasmletnodes", *nodeFlag)
	t.Logf("kubectl get wasmletnodes:\n%s", r.stdout)
	for _, want := range []string{"policy", d2, ps.Version, "enforce", refusal} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kubectl get wasmletnodes lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = kubectl(t, time.Minute, "", "get", "wasmletplugins")
	t.Logf("kubectl get wasmletplugins:\n%s", r.stdout)
	if !strings.Contains(r.stdout, v1ref) || !strings.Contains(r.stdout, "nowhere") {
		t.Errorf("kubectl get wasmletplugins lacks the image or selector:\n%s%s", r.stdout, r.stderr)
	}
	out, err := exec.Command(flags.Wasmlet, "fleet", "status", "--kubeconfig", filepath.Join(*clusterFlag, "admin.kubeconfig")).CombinedOutput()
	t.Logf("wasmlet fleet status:\n%s", out)
	if err != nil || !strings.Contains(string(out), "elsewhere") || !strings.Contains(string(out), "matches no node") ||
		!strings.Contains(string(out), "1 node(s) enforce "+d2) || !strings.Contains(string(out), "error on "+*nodeFlag) {
		t.Errorf("wasmlet fleet status: %v", err)
	}

	// The unmatched plugin never loaded.
	if ps, err := a.pluginNames(); err != nil || strings.Contains(ps, "elsewhere") {
		t.Errorf("/plugins: %s, %v; want no plugin elsewhere", ps, err)
	}

	// The node's labels start matching the selector: it loads the plugin;
	// they stop matching: it drops it.
	if r := kubectl(t, time.Minute, "", "label", "node", *nodeFlag, "pool=nowhere"); r.code != 0 {
		t.Fatalf("kubectl label: %s%s", r.stdout, r.stderr)
	}
	harness.Eventually(t, 2*time.Minute, "elsewhere loaded once the node's labels match", func() (bool, string) {
		ps, err := a.servingPlugins()
		return err == nil && ps["elsewhere"] == d1, fmt.Sprint(ps, err)
	})
	if r := kubectl(t, time.Minute, "", "label", "node", *nodeFlag, "pool-"); r.code != 0 {
		t.Fatalf("kubectl label: %s%s", r.stdout, r.stderr)
	}
	harness.Eventually(t, 2*time.Minute, "elsewhere dropped once the node's labels stop matching", func() (bool, string) {
		ps, err := a.servingPlugins()
		_, loaded := ps["elsewhere"]
		return err == nil && !loaded, fmt.Sprint(ps, err)
	})

	// The node's own credentials: its WasmletNode yes, another's no.
	nodeKubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(*kubectlFlag, append([]string{"--kubeconfig", filepath.Join(*clusterFlag, "node-"+*nodeFlag+".kubeconfig")}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if out, err := nodeKubectl("apiVersion: wasmlet.dev/v1alpha1\nkind: WasmletNode\nmetadata:\n  name: another-node\n", "create", "-f", "-"); err == nil ||
		!strings.Contains(out, "only its own WasmletNode") {
		t.Errorf("the node created another node's WasmletNode: %v %s", err, out)
	}
	if out, err := nodeKubectl("", "delete", "wasmletplugin", "policy", "--dry-run=server"); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("the node may delete a WasmletPlugin: %v %s", err, out)
	}

	// At rest: the node's requests for the feature over a quiet minute,
	// from the audit log.
	quiet := time.Now()
	time.Sleep(time.Minute) // the figure is a rate over a minute at rest
	perMin := auditCount(t, quiet, time.Now())
	t.Logf("FIGURE API requests per node per minute at rest for WasmletPlugins/WasmletNodes (audit log, user system:node:%s, over %s): %v", *nodeFlag, time.Minute, perMin)

	// kubectl delete takes it off.
	if r := kubectl(t, time.Minute, "", "delete", "wasmletplugin", "policy"); r.code != 0 {
		t.Fatalf("kubectl delete: %s%s", r.stdout, r.stderr)
	}
	harness.Eventually(t, 2*time.Minute, "policy gone from the report", func() (bool, string) {
		_, ok, s := entry()
		return !ok, s
	})
	runs(pod(false))
}

// wplugin is a WasmletPlugin named name for image, more appended to its
// spec.
func wplugin(name, image, more string) string {
	return "apiVersion: wasmlet.dev/v1alpha1\nkind: WasmletPlugin\nmetadata:\n  name: " + name + "\nspec:\n  image: " + image + "\n" + more
}

// pluginNames is what /plugins answers.
func (a *agent) pluginNames() (string, error) {
	code, b, err := a.Get("/plugins")
	if err == nil && code != 200 {
		err = fmt.Errorf("/plugins: %d", code)
	}
	return string(b), err
}

// servingPlugins is what /plugins lists as loaded: name → digest.
func (a *agent) servingPlugins() (map[string]string, error) {
	code, b, err := a.Get("/plugins")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/plugins: %d", code)
	}
	var body struct {
		Plugins []struct{ Name, State, Digest string }
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("/plugins: %w", err)
	}
	out := map[string]string{}
	for _, p := range body.Plugins {
		if p.State == "loaded" {
			out[p.Name] = p.Digest
		}
	}
	return out, nil
}

// publicKeyPEM is a fresh ECDSA P-256 public key, as cosign writes one.
func publicKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// auditCount counts the node's requests on wasmletplugins and wasmletnodes
// received between from and to, by verb and resource.
func auditCount(t *testing.T, from, to time.Time) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(*clusterFlag, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			AuditID  string    `json:"auditID"`
			Verb     string    `json:"verb"`
			Received time.Time `json:"requestReceivedTimestamp"`
			User     struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct{ Resource, Subresource string } `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != "system:node:"+*nodeFlag || seen[e.AuditID] ||
			e.Received.Before(from) || e.Received.After(to) || (e.ObjectRef.Resource != "wasmletplugins" && e.ObjectRef.Resource != "wasmletnodes") {
			continue
		}
		seen[e.AuditID] = true
		out[e.Verb+" "+strings.TrimSuffix(e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource, "/")]++
	}
	return out
}
