//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var (
	pluginsFlag = flag.String("plugins", "../../../build/plugins", "the built plugins (hack/build-plugins.sh)")
	goguestFlag = flag.String("goguest", "../../../host/internal/pluginhost/testdata/goguest", "the plugin host's faulty Go guest (panics, spins or allocates on demand)")
)

// TestPlugins runs wasmlet with a plugin directory of first-party plugins
// (the .wasm files `make plugins` built) and checks the plugin path end to
// end: the URL source, an admission policy, an env-injecting hook, faulty
// plugins under both failure policies, and hot reload. One agent, cases in
// order: the faulty plugin of one case must not judge another's pods.
func TestPlugins(t *testing.T) {
	cleanRuntime(t)
	t.Cleanup(func() { cleanRuntime(t) })
	ensurePlugins(t, pluginBuildDir(), "url-source", "no-privileged", "image-allowlist", "inject-env", "audit")
	srv := newPodServer(t)
	srv.setRaw([]byte(`{"apiVersion":"v1","kind":"PodList","items":[]}`))
	a := newAgent(t, "plugins", flags.Endpoint)
	pd := &pluginDir{dir: filepath.Join(a.Dir, "plugins")}
	if err := os.MkdirAll(pd.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pd.install(t, "url-source", nil, func(m *abi.Manifest) {
		m.Config = map[string]string{"url": srv.url(), "pollInterval": "1s", "timeout": "2s"}
	})
	pd.install(t, "no-privileged", nil, nil)
	pd.install(t, "image-allowlist", nil, func(m *abi.Manifest) { m.Config["allowed"] = registryOf(flags.Image) })
	pd.install(t, "inject-env", nil, func(m *abi.Manifest) { m.Config["env"] = "WASMLET_E2E=injected-by-plugin\n" })
	pd.install(t, "audit", nil, nil)

	saved := *agentFlagsFlag
	*agentFlagsFlag = strings.TrimSpace(saved + " --plugin-dir " + pd.dir)
	a.start(t)
	*agentFlagsFlag = saved
	t.Cleanup(func() { a.Stop(t) })

	for _, c := range []struct {
		name string
		f    func(*testing.T, *agent, *pluginDir, *podServer)
	}{
		{"URLSource", testURLSource},
		{"NoPrivilegedAndInjectEnv", testNoPrivilegedAndInjectEnv},
		{"FaultyPlugins", testFaultyPlugins},
		{"MonitorMode", testMonitorMode},
		{"HotReload", testHotReload},
	} {
		t.Run(c.name, func(t *testing.T) {
			a.diagnose(t)
			c.f(t, a, pd, srv)
		})
	}
	if !a.LogContains("audit: PreCreate pod default/") || !a.LogContains("audit: PodTerminated pod default/") {
		t.Errorf("the audit hook's lines are missing from the agent's log")
	}
}

// A pod served over HTTP runs; a change replaces it; an outage leaves it
// running; the server back without it removes it.
func testURLSource(t *testing.T, a *agent, _ *pluginDir, srv *podServer) {
	v1pod := newPod("fromurl", v1.RestartPolicyAlways, box("main", "log", "200ms", "url-v1"))
	srv.set(t, v1pod)
	p := a.waitRunning(t, "fromurl", 2*time.Minute)
	if src := p.Annotations["kubernetes.io/config.source"]; src != "url-source" {
		t.Errorf("config.source = %q, want url-source", src)
	}
	readFileEventually(t, a.containerLog(p, "main", 0), "url-v1", 30*time.Second)

	srv.set(t, newPod("fromurl", v1.RestartPolicyAlways, box("main", "log", "200ms", "url-v2")))
	p2 := a.waitPod(t, "fromurl", 2*time.Minute, "running with the changed args", func(p *v1.Pod) bool {
		return allRunning(p) && strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "url-v2")
	})
	if p2.UID == p.UID {
		t.Errorf("a changed manifest kept UID %s (static pods are replaced)", p.UID)
	}

	srv.down(t)
	harness.Holds(t, 6*time.Second, "the URL's pod keeps running while the server is down", func() (bool, string) {
		p, err := a.pod("fromurl")
		if err != nil {
			return false, err.Error()
		}
		return p != nil && p.UID == p2.UID && allRunning(p), harness.PodSummary(p)
	})
	if !a.LogContains("source plugin poll failed; keeping its last good pods") {
		t.Errorf("no poll failure logged while the server was down")
	}

	srv.setRaw([]byte(`{"apiVersion":"v1","kind":"PodList","items":[]}`))
	srv.up(t)
	a.waitGone(t, "fromurl", 2*time.Minute)
	waitRuntimeGone(t, "fromurl", 2*time.Minute)
}

// no-privileged rejects a privileged static pod naming itself; a plain pod
// runs and sees inject-env's variable and label.
func testNoPrivilegedAndInjectEnv(t *testing.T, a *agent, _ *pluginDir, _ *podServer) {
	priv := newPod("priv", v1.RestartPolicyAlways, box("main", "sleep", "inf"))
	yes := true
	priv.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &yes}
	a.Write(t, "priv.yaml", priv)
	plain := newPod("plain", v1.RestartPolicyAlways, box("main", "env", "WASMLET_E2E", ";", "sleep", "inf"))
	a.Write(t, "plain.yaml", plain)
	defer a.Remove(t, "priv.yaml")
	defer a.Remove(t, "plain.yaml")

	a.waitPod(t, "priv", time.Minute, "Failed by no-privileged", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Privileged" && strings.Contains(p.Status.Message, "no-privileged")
	})
	if cs := podContainers(t, "priv"); len(cs) != 0 {
		t.Errorf("the rejected pod has %d containers in the runtime", len(cs))
	}
	p := a.waitRunning(t, "plain", 2*time.Minute)
	readFileEventually(t, a.containerLog(p, "main", 0), "WASMLET_E2E=injected-by-plugin", 30*time.Second)
	cs := podContainers(t, "plain")
	if len(cs) == 0 || cs[len(cs)-1].Labels["wasmlet.io/injected"] != "true" {
		t.Errorf("inject-env's label is not on the CRI container: %v", cs)
	}
}

// A panicking, spinning or memory-eating admission plugin rejects pods with
// a clear reason under Fail, is ignored (logged, counted) under Ignore, and
// the agent stays up.
func testFaultyPlugins(t *testing.T, a *agent, pd *pluginDir, _ *podServer) {
	wasm := buildGoguest(t, a.Dir)
	defer func() {
		pd.uninstall(t, "faulty")
		harness.Eventually(t, time.Minute, "/plugins without faulty", func() (bool, string) {
			ps, err := a.plugins()
			if err != nil {
				return false, err.Error()
			}
			for _, s := range ps {
				if s.Name == "faulty" || strings.Contains(s.File, "faulty") {
					return false, fmt.Sprintf("%+v", s)
				}
			}
			return true, ""
		})
	}()
	for i, fault := range []string{"panic", "spin", "bomb"} {
		for j, policy := range []abi.FailurePolicy{abi.FailurePolicyFail, abi.FailurePolicyIgnore} {
			version := fmt.Sprintf("1.%d.%d", i, j)
			pd.installModule(t, wasm, abi.Manifest{
				Name: "faulty", Version: version, ABI: abi.V1, Kinds: []abi.Kind{abi.KindAdmission},
				FailurePolicy: policy,
				Permissions:   abi.Permissions{Timeout: abi.Duration{Duration: 300 * time.Millisecond}, MemoryPages: 256},
			})
			waitPlugin(t, a, "faulty", "version "+version, func(s pluginStatus) bool { return s.Version == version })
			name := strings.ToLower(string(policy)) + "-" + fault
			a.Write(t, name+".yaml", newPod(name, v1.RestartPolicyAlways, box("main", "sleep", "inf")))
			if policy == abi.FailurePolicyFail {
				a.waitPod(t, name, time.Minute, "rejected because faulty failed", func(p *v1.Pod) bool {
					return p.Status.Phase == v1.PodFailed && p.Status.Reason == "AdmissionError" &&
						strings.Contains(p.Status.Message, "faulty") && strings.Contains(p.Status.Message, "failed")
				})
			} else {
				a.waitRunning(t, name, 2*time.Minute)
				s := waitPlugin(t, a, "faulty", "an error counted", func(s pluginStatus) bool { return s.Errors >= 1 })
				if fault == "spin" && s.Timeouts < 1 {
					t.Errorf("spin: no timeout counted: %+v", s)
				}
				if !a.LogContains("plugin call failed; ignored (failurePolicy Ignore)") {
					t.Errorf("%s: the ignored failure is not logged", fault)
				}
			}
			if code, _, err := a.Get("/healthz"); err != nil || code != http.StatusOK || !a.Running() {
				t.Fatalf("agent unhealthy after a %s plugin under %s: %d %v", fault, policy, code, err)
			}
			a.Remove(t, name+".yaml")
		}
	}
	if n, err := a.Metric("wasmlet_plugin_failures_total"); err != nil || n < 6 {
		t.Errorf("wasmlet_plugin_failures_total = %v (%v), want ≥ 6", n, err)
	}
}

// A copy of image-allowlist in mode monitor that allows no registry of the
// suite's denies a pod: the pod runs, /plugins shows the mode, the denial
// is in the log and counted; the enforcing image-allowlist still serves.
func testMonitorMode(t *testing.T, a *agent, pd *pluginDir, _ *podServer) {
	pd.install(t, "image-allowlist", nil, func(m *abi.Manifest) {
		m.Name, m.Mode = "watch-images", abi.ModeMonitor
		m.Config["allowed"] = "registry.example.invalid"
	})
	defer pd.uninstall(t, "watch-images")
	waitPlugin(t, a, "watch-images", "loaded in mode monitor", func(s pluginStatus) bool {
		return s.State == "loaded" && s.Mode == string(abi.ModeMonitor)
	})
	a.Write(t, "watched.yaml", newPod("watched", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	defer a.Remove(t, "watched.yaml")
	a.waitRunning(t, "watched", 2*time.Minute)
	if !a.LogContains("admission plugin in monitor mode denied a pod; admitted: plugin=watch-images") {
		t.Error("the monitored denial is not in the agent's log")
	}
	if n, err := a.Metric("wasmlet_admission_monitored_denials_total", `plugin="watch-images"`, `reason="ImageNotAllowed"`); err != nil || n < 1 {
		t.Errorf("wasmlet_admission_monitored_denials_total{plugin=watch-images} = %v (%v), want ≥ 1", n, err)
	}
}

// A new version dropped into the directory changes verdicts without a
// restart; a broken one is refused, shown failed, and the old one serves.
func testHotReload(t *testing.T, a *agent, pd *pluginDir, _ *podServer) {
	a.Write(t, "reload-a.yaml", newPod("reload-a", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	defer a.Remove(t, "reload-a.yaml")
	a.waitRunning(t, "reload-a", 2*time.Minute)

	pd.install(t, "image-allowlist", nil, func(m *abi.Manifest) {
		m.Version = "2.0.0"
		m.Config["allowed"] = "registry.example.invalid"
	})
	waitPlugin(t, a, "image-allowlist", "version 2.0.0", func(s pluginStatus) bool { return s.Version == "2.0.0" })
	a.Write(t, "reload-b.yaml", newPod("reload-b", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	defer a.Remove(t, "reload-b.yaml")
	a.waitPod(t, "reload-b", time.Minute, "rejected by image-allowlist 2.0.0", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "ImageNotAllowed" && strings.Contains(p.Status.Message, "image-allowlist")
	})

	// Version 3 is not WebAssembly: refused, and 2.0.0 keeps serving.
	pd.installModule(t, []byte("this is not a wasm module"), abi.Manifest{Name: "image-allowlist", Version: "3.0.0", ABI: abi.V1, Kinds: []abi.Kind{abi.KindAdmission}})
	s := waitPlugin(t, a, "image-allowlist", "replacement refused", func(s pluginStatus) bool { return s.LastLoad == "failed" })
	if s.State != "loaded" || s.Version != "2.0.0" || !strings.Contains(s.Error, "compile") {
		t.Errorf("after a broken version: %+v", s)
	}
	a.Write(t, "reload-c.yaml", newPod("reload-c", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	defer a.Remove(t, "reload-c.yaml")
	a.waitPod(t, "reload-c", time.Minute, "rejected by the still-serving 2.0.0", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "ImageNotAllowed"
	})
	if p, _ := a.pod("reload-a"); p == nil || !allRunning(p) {
		t.Errorf("a pod admitted before the reload stopped: %s", harness.PodSummary(p))
	}
}

// pluginBuildDir is where ensurePlugins builds when -plugins lacks a plugin.
func pluginBuildDir() string { return filepath.Join(flags.Base, "plugins-build") }

// ensurePlugins builds the named first-party plugins with
// hack/build-plugins.sh into dir unless -plugins has them all (hack/e2e.sh
// run without `make plugins`), and points -plugins there.
func ensurePlugins(t *testing.T, dir string, names ...string) {
	t.Helper()
	missing := false
	var dirs []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(*pluginsFlag, n+abi.ManifestSuffix)); err != nil {
			missing = true
		}
		dirs = append(dirs, "plugins/"+n)
	}
	if !missing {
		return
	}
	t.Logf("building %v into %s (%s lacks them)", dirs, dir, *pluginsFlag)
	cmd := exec.Command(filepath.Join(flags.Hack, "build-plugins.sh"), append([]string{dir}, dirs...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-plugins.sh: %v\n%s", err, b)
	}
	*pluginsFlag = dir
}

// registryOf is the registry part of an image reference.
func registryOf(image string) string {
	if first, _, ok := strings.Cut(image, "/"); ok && strings.ContainsAny(first, ".:") {
		return first
	}
	return "docker.io"
}

// pluginDir is the agent's plugin directory.
type pluginDir struct{ dir string }

// install copies a built plugin (its .wasm and manifest from -plugins) into
// the directory, with edit applied to the manifest.
func (d *pluginDir) install(t *testing.T, name string, _ map[string]string, edit func(*abi.Manifest)) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(*pluginsFlag, name+abi.ManifestSuffix))
	if err != nil {
		t.Fatalf("%v (run make plugins)", err)
	}
	var m abi.Manifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	wasm, err := os.ReadFile(filepath.Join(*pluginsFlag, m.Wasm))
	if err != nil {
		t.Fatal(err)
	}
	if m.Config == nil {
		m.Config = map[string]string{}
	}
	if edit != nil {
		edit(&m)
	}
	d.installModule(t, wasm, m)
}

// installModule writes wasm and its manifest m (sha256 filled in), each
// renamed into place: the module first, so the manifest that pins it comes
// last.
func (d *pluginDir) installModule(t *testing.T, wasm []byte, m abi.Manifest) {
	t.Helper()
	sum := sha256.Sum256(wasm)
	m.SHA256, m.Wasm = hex.EncodeToString(sum[:]), m.Name+".wasm"
	mf, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{m.Wasm, wasm}, {m.Name + abi.ManifestSuffix, mf}} {
		tmp := filepath.Join(filepath.Dir(d.dir), "."+f.name+".tmp")
		if err := os.WriteFile(tmp, f.b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(d.dir, f.name)); err != nil {
			t.Fatal(err)
		}
	}
}

// uninstall removes a plugin's manifest and module.
func (d *pluginDir) uninstall(t *testing.T, name string) {
	for _, f := range []string{name + abi.ManifestSuffix, name + ".wasm"} {
		if err := os.Remove(filepath.Join(d.dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Error(err)
		}
	}
}

// plugins reads /plugins.
// pluginStatus is the part of a /plugins entry the suite reads, decoded
// from the JSON as any client of the endpoint would.
type pluginStatus struct {
	File     string `json:"file"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Error    string `json:"error"`
	LastLoad string `json:"lastLoad"`
	Version  string `json:"version"`
	Mode     string `json:"mode"`
	Calls    uint64 `json:"calls"`
	Errors   uint64 `json:"errors"`
	Timeouts uint64 `json:"timeouts"`
	// A plugin in a registry: its image, the serving digest, whether it
	// was verified, what the image last resolved to and the last failure.
	Image            string `json:"image"`
	Digest           string `json:"digest"`
	Verified         bool   `json:"verified"`
	ResolvedDigest   string `json:"resolvedDigest"`
	LastResolveError string `json:"lastResolveError"`
}

func (a *agent) plugins() ([]pluginStatus, error) {
	code, b, err := a.Get("/plugins")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/plugins: %d %s", code, b)
	}
	var body struct{ Plugins []pluginStatus }
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("/plugins: %w", err)
	}
	return body.Plugins, nil
}

// waitPlugin waits until /plugins shows plugin name satisfying cond.
func waitPlugin(t *testing.T, a *agent, name, what string, cond func(pluginStatus) bool) pluginStatus {
	t.Helper()
	var got pluginStatus
	harness.Eventually(t, time.Minute, "/plugins: "+name+": "+what, func() (bool, string) {
		ps, err := a.plugins()
		if err != nil {
			return false, err.Error()
		}
		for _, s := range ps {
			if s.Name == name || strings.HasSuffix(s.File, "/"+name+abi.ManifestSuffix) {
				got = s
				return cond(s), fmt.Sprintf("%+v", s)
			}
		}
		return false, "not listed"
	})
	return got
}

// buildGoguest builds the plugin host's faulty Go guest for wasip1.
func buildGoguest(t *testing.T, dir string) []byte {
	t.Helper()
	out := filepath.Join(dir, "goguest.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = *goguestFlag
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", *goguestFlag, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// podServer serves one manifest over HTTP on loopback with an ETag, and can
// go down and come back on the same address.
type podServer struct {
	mu   sync.Mutex
	body []byte
	addr string
	srv  *http.Server
}

func newPodServer(t *testing.T) *podServer {
	s := &podServer{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	s.serve(l)
	t.Cleanup(func() { s.down(t) })
	return s
}

func (s *podServer) url() string { return "http://" + s.addr + "/pods.yaml" }

func (s *podServer) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body := s.body
		s.mu.Unlock()
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Write(body)
	})}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(l)
}

// set serves p as YAML.
func (s *podServer) set(t *testing.T, p *v1.Pod) {
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	s.setRaw(b)
}

func (s *podServer) setRaw(b []byte) {
	s.mu.Lock()
	s.body = b
	s.mu.Unlock()
}

// down closes the server (connections refused from now on).
func (s *podServer) down(t *testing.T) {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// up serves again on the same address.
func (s *podServer) up(t *testing.T) {
	var l net.Listener
	var err error
	harness.Eventually(t, 10*time.Second, "listen again on "+s.addr, func() (bool, string) {
		l, err = net.Listen("tcp", s.addr)
		return err == nil, fmt.Sprint(err)
	})
	s.serve(l)
}
