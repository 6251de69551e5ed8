package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/cri-client/pkg/fake"

	"github.com/wasmlet/wasmlet/host/agent"
	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRunConfig(t *testing.T) {
	dir := t.TempDir()
	full := writeFile(t, dir, "full.yaml", `kind: WasmletConfiguration
apiVersion: wasmlet.io/v1alpha1
nodeName: Node-A
staticPodPath: /etc/wasmlet/manifests
fileCheckFrequency: 5s
pluginDir: /etc/wasmlet/plugins
podObjectsDir: /etc/wasmlet/objects
port: 10251
clientCAFile: /etc/wasmlet/ca.crt
authorizationMode: Webhook
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
imageServiceEndpoint: unix:///run/images.sock
runtimeRequestTimeout: 30s
rootDir: /srv/wasmlet
podLogsDir: /srv/logs
syncFrequency: 30s
housekeepingInterval: 3s
containerGCPeriod: 90s
plegRelistPeriod: 500ms
volumeStatsAggPeriod: 20s
maxPods: 50
address: 0.0.0.0
readOnlyPort: 10256
logLevel: debug
logJSON: true
kubeconfig: /etc/wasmlet/node.kubeconfig
nodeStatusUpdateFrequency: 20s
nodeStatusReportFrequency: 1m
clusterDNS: [10.96.0.10]
resolvConf: /etc/wasmlet/resolv.conf
cgroupsPerQOS: false
cgroupDriver: systemd
cgroupRoot: /wasmlet
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
`)
	readOnlyOff := writeFile(t, dir, "off.yaml", "kind: WasmletConfiguration\nreadOnlyPort: 0\n")
	typo := writeFile(t, dir, "typo.yaml", "kind: WasmletConfiguration\nstaticPodPaht: /x\n")
	wrongKind := writeFile(t, dir, "kind.yaml", "kind: KubeletConfiguration\n")
	badDuration := writeFile(t, dir, "dur.yaml", "kind: WasmletConfiguration\nsyncFrequency: soon\n")
	auth := writeFile(t, dir, "auth.yaml", `kind: WasmletConfiguration
authentication:
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
  webhook: {enabled: false, cacheTTL: 30s}
  anonymous: {enabled: true}
authorization:
  mode: AlwaysAllow
  webhook: {cacheAuthorizedTTL: 1m, cacheUnauthorizedTTL: 5s}
`)
	authTwice := writeFile(t, dir, "twice.yaml", "kind: WasmletConfiguration\nclientCAFile: /a\nauthentication: {x509: {clientCAFile: /b}}\n")
	authTypo := writeFile(t, dir, "authtypo.yaml", "kind: WasmletConfiguration\nauthorization: {mdoe: Webhook}\n")
	authBadMode := writeFile(t, dir, "authmode.yaml", "kind: WasmletConfiguration\nauthorization: {mode: RBAC}\n")
	authNegative := writeFile(t, dir, "authneg.yaml", "kind: WasmletConfiguration\nauthentication: {webhook: {cacheTTL: -1s}}\n")

	d := agent.Defaults()
	tests := []struct {
		name    string
		args    []string
		check   func(agent.Config, logOptions) string // "" when right
		wantErr string
	}{
		{"defaults", []string{"--node-name", "n1"}, func(c agent.Config, lo logOptions) string {
			want := d
			want.NodeName = "n1"
			if fmt.Sprint(c) != fmt.Sprint(want) || lo.Level != "info" || lo.JSON {
				return fmt.Sprintf("%+v %+v", c, lo)
			}
			return ""
		}, ""},
		{"default node name is the host name", nil, func(c agent.Config, _ logOptions) string {
			h, _ := os.Hostname()
			if c.NodeName != strings.ToLower(h) {
				return c.NodeName
			}
			return ""
		}, ""},
		{"flags", []string{"--node-name=N1", "--pod-manifest-path=/m", "--container-runtime-endpoint=unix:///c.sock",
			"--sync-frequency=10s", "--max-pods=7", "--read-only-port=0", "--log-level=warn", "--log-json"}, func(c agent.Config, lo logOptions) string {
			if c.NodeName != "n1" || c.StaticPodPath != "/m" || c.RuntimeEndpoint != "unix:///c.sock" || c.SyncFrequency != 10*time.Second ||
				c.MaxPods != 7 || c.ReadOnlyPort != 0 || lo.Level != "warn" || !lo.JSON || c.RootDir != d.RootDir {
				return fmt.Sprintf("%+v %+v", c, lo)
			}
			return ""
		}, ""},
		{"file", []string{"--config", full}, func(c agent.Config, lo logOptions) string {
			want := agent.Config{NodeName: "node-a", StaticPodPath: "/etc/wasmlet/manifests", FileCheckFrequency: 5 * time.Second,
				PodObjectsDir: "/etc/wasmlet/objects", VolumeResyncPeriod: d.VolumeResyncPeriod, PluginIdleTimeout: d.PluginIdleTimeout,
				Port: 10251, ClientCAFile: "/etc/wasmlet/ca.crt", AuthorizationMode: "Webhook", PluginDir: "/etc/wasmlet/plugins", RuntimeEndpoint: "unix:///run/containerd/containerd.sock", ImageEndpoint: "unix:///run/images.sock",
				RuntimeRequestTimeout: 30 * time.Second, RootDir: "/srv/wasmlet", PodLogsDir: "/srv/logs", SyncFrequency: 30 * time.Second,
				HousekeepingInterval: 3 * time.Second, ContainerGCPeriod: 90 * time.Second, PLEGRelistPeriod: 500 * time.Millisecond, VolumeStatsAggPeriod: 20 * time.Second, MaxPods: 50, Address: "0.0.0.0", ReadOnlyPort: 10256,
				KubeConfig: "/etc/wasmlet/node.kubeconfig", KubeAPIQPS: d.KubeAPIQPS, KubeAPIBurst: d.KubeAPIBurst,
				NodeStatusUpdateFrequency: 20 * time.Second, NodeStatusReportFrequency: time.Minute,
				ClusterDNS: []string{"10.96.0.10"}, ResolvConf: "/etc/wasmlet/resolv.conf", CgroupDriver: "systemd", CgroupRoot: "/wasmlet",
				ContainerLogMaxSize: 1 << 20, ContainerLogMaxFiles: 3}
			if fmt.Sprint(c) != fmt.Sprint(want) || lo.Level != "debug" || !lo.JSON {
				return fmt.Sprintf("%+v %+v", c, lo)
			}
			return ""
		}, ""},
		{"flags override the file", []string{"--max-pods", "9", "--config", full, "--root-dir=/r", "--log-json=false"}, func(c agent.Config, lo logOptions) string {
			if c.MaxPods != 9 || c.RootDir != "/r" || lo.JSON || c.SyncFrequency != 30*time.Second || c.StaticPodPath != "/etc/wasmlet/manifests" {
				return fmt.Sprintf("%+v %+v", c, lo)
			}
			return ""
		}, ""},
		{"file sets a zero port", []string{"--config", readOnlyOff}, func(c agent.Config, _ logOptions) string {
			if c.ReadOnlyPort != 0 || c.SyncFrequency != d.SyncFrequency {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"authentication and authorization blocks", []string{"--config", auth}, func(c agent.Config, _ logOptions) string {
			if c.ClientCAFile != "/etc/kubernetes/pki/ca.crt" || !c.NoTokenReview || c.TokenCacheTTL != 30*time.Second || !c.AnonymousAuth ||
				c.AuthorizationMode != "AlwaysAllow" || c.AuthorizedCacheTTL != time.Minute || c.UnauthorizedCacheTTL != 5*time.Second {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"flags override the blocks", []string{"--config", auth, "--client-ca-file=/f", "--anonymous-auth=false", "--authorization-mode=Webhook"}, func(c agent.Config, _ logOptions) string {
			if c.ClientCAFile != "/f" || c.AnonymousAuth || c.AuthorizationMode != "Webhook" || !c.NoTokenReview {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"a block and its flat field", []string{"--config", authTwice}, nil, "authentication.x509.clientCAFile and clientCAFile"},
		{"unknown field in a block", []string{"--config", authTypo}, nil, "mdoe"},
		{"bad mode in a block", []string{"--config", authBadMode}, nil, `authorization-mode "RBAC"`},
		{"negative cache TTL", []string{"--config", authNegative}, nil, "authentication.webhook.cacheTTL must not be negative"},
		{"log rotation flags", []string{"--container-log-max-size=500Ki", "--container-log-max-files=2"}, func(c agent.Config, _ logOptions) string {
			if c.ContainerLogMaxSize != 500<<10 || c.ContainerLogMaxFiles != 2 {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"plugin idle timeout", []string{"--plugin-idle-timeout=1m"}, func(c agent.Config, _ logOptions) string {
			if c.PluginIdleTimeout != time.Minute {
				return fmt.Sprintf("PluginIdleTimeout %v", c.PluginIdleTimeout)
			}
			return ""
		}, ""},
		{"plugin idle timeout in the file", []string{"--config", writeFile(t, dir, "idle.yaml", "kind: WasmletConfiguration\npluginIdleTimeout: 0s\n")}, func(c agent.Config, _ logOptions) string {
			if c.PluginIdleTimeout != 0 {
				return fmt.Sprintf("PluginIdleTimeout %v", c.PluginIdleTimeout)
			}
			return ""
		}, ""},
		{"negative plugin idle timeout", []string{"--plugin-idle-timeout=-1s"}, nil, "plugin-idle-timeout must not be negative"},
		{"bad log size", []string{"--container-log-max-size=big"}, nil, `"big" is not a quantity`},
		{"zero log size", []string{"--container-log-max-size=0"}, nil, "container-log-max-size must be positive"},
		{"one log file", []string{"--container-log-max-files=1"}, nil, "container-log-max-files must be at least 2, not 1"},
		{"bad log size in the file", []string{"--config", writeFile(t, dir, "logsize.yaml", "kind: WasmletConfiguration\ncontainerLogMaxSize: lots\n")}, nil, "containerLogMaxSize"},
		{"unknown field", []string{"--config", typo}, nil, "staticPodPaht"},
		{"wrong kind", []string{"--config", wrongKind}, nil, `kind is "KubeletConfiguration"`},
		{"bad duration", []string{"--config", badDuration}, nil, "dur.yaml"},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil, "nope.yaml"},
		{"bad flag", []string{"--max-pod=1"}, nil, "max-pod"},
		{"negative duration", []string{"--sync-frequency=-1s"}, nil, "sync-frequency must be positive"},
		{"bad port", []string{"--read-only-port=70000"}, nil, "not a port"},
		{"bad level", []string{"--log-level=loud"}, nil, "log-level"},
		{"bad authorization mode", []string{"--authorization-mode=RBAC"}, nil, "authorization-mode"},
		{"key without certificate", []string{"--tls-private-key-file=/k"}, nil, "go together"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
		{"bootstrapping rotates by default", []string{"--kubeconfig=/k", "--bootstrap-kubeconfig=/b", "--cert-dir=/pki", "--rotate-server-certificates"}, func(c agent.Config, _ logOptions) string {
			if c.BootstrapKubeConfig != "/b" || c.CertDir != "/pki" || !c.RotateCertificates || !c.RotateServerCertificates {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"bootstrapping without rotation", []string{"--kubeconfig=/k", "--bootstrap-kubeconfig=/b", "--rotate-certificates=false"}, func(c agent.Config, _ logOptions) string {
			if c.RotateCertificates {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"no rotation without bootstrapping", []string{"--kubeconfig=/k"}, func(c agent.Config, _ logOptions) string {
			if c.RotateCertificates || c.RotateServerCertificates {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"certificate fields in the file", []string{"--bootstrap-kubeconfig=/b", "--config", writeFile(t, dir, "certs.yaml", "kind: WasmletConfiguration\nkubeconfig: /k\nrotateCertificates: false\nserverTLSBootstrap: true\n")}, func(c agent.Config, _ logOptions) string {
			if c.RotateCertificates || !c.RotateServerCertificates || c.KubeConfig != "/k" {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"bootstrap without kubeconfig", []string{"--bootstrap-kubeconfig=/b"}, nil, "bootstrap-kubeconfig needs --kubeconfig"},
		{"server rotation without kubeconfig", []string{"--rotate-server-certificates"}, nil, "rotate-server-certificates needs --kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, lo, err := loadRunConfig(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(c, lo); msg != "" {
				t.Errorf("got %s", msg)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRunAgent runs `wasmlet run` in-process against the fake CRI over a
// unix socket: a static pod reaches Running on /pods, /healthz answers, and
// cancelling (what SIGTERM does) stops it with exit code 0.
func TestRunAgent(t *testing.T) {
	dir, err := os.MkdirTemp("", "wlrun") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	manifests := filepath.Join(dir, "m")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifests, "web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  hostNetwork: true\n  containers: [{name: c, image: busybox:1.36}]\n")
	endpoint := "unix://" + filepath.Join(dir, "cri.sock")
	f := fake.NewFakeRemoteRuntime()
	if err := f.Start(endpoint); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	port := freePort(t)
	conf := writeFile(t, dir, "wasmlet.yaml", fmt.Sprintf("kind: WasmletConfiguration\nnodeName: n1\nstaticPodPath: %s\nrootDir: %s\npodLogsDir: %s\nreadOnlyPort: %d\nplegRelistPeriod: 100ms\n",
		manifests, filepath.Join(dir, "root"), filepath.Join(dir, "logs"), port))

	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- runAgent(ctx, []string{"--config", conf, "--container-runtime-endpoint", endpoint, "--log-json"}, &logs)
	}()

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var list v1.PodList
		if resp, err := http.Get(base + "/pods"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			if err == nil && len(list.Items) == 1 && list.Items[0].Name == "web-n1" && list.Items[0].Status.Phase == v1.PodRunning {
				break
			}
		}
		pollAgain(t, code, &logs, deadline, func() string { return fmt.Sprintf("web-n1 not Running on /pods; last list %+v", list.Items) })
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Errorf("/healthz %d %q", resp.StatusCode, b)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit code %d after cancel, want 0\n%s", c, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("wasmlet run did not stop after cancel")
	}
	if !strings.Contains(logs.String(), `"@message":"stopped"`) {
		t.Errorf("no JSON 'stopped' line in the logs:\n%s", logs.String())
	}
}

// TestRunAgent_runtimeUnreachable: with no runtime answering, the read-only
// server is up and /healthz is red naming the runtime's endpoint; SIGTERM
// (the context's end) then stops the agent with exit code 0.
func TestRunAgent_runtimeUnreachable(t *testing.T) {
	dir, err := os.MkdirTemp("", "wlrun")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	endpoint := "unix://" + filepath.Join(dir, "nobody.sock")
	port := freePort(t)
	conf := writeFile(t, dir, "wasmlet.yaml", fmt.Sprintf("kind: WasmletConfiguration\nnodeName: n1\nrootDir: %s\npodLogsDir: %s\nreadOnlyPort: %d\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "logs"), port))
	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- runAgent(ctx, []string{"--config", conf, "--container-runtime-endpoint", endpoint}, &logs)
	}()
	deadline := time.Now().Add(60 * time.Second)
	var status int
	var body string
	for {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz?verbose", port)); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, body = resp.StatusCode, string(b)
			if status != 200 && strings.Contains(body, "nobody.sock") {
				break
			}
		}
		pollAgain(t, code, &logs, deadline, func() string { return fmt.Sprintf("/healthz never red naming the runtime; last %d %q", status, body) })
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit code %d after SIGTERM while waiting for the runtime, want 0\n%s", c, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("wasmlet run did not stop after SIGTERM")
	}
}

// pollAgain fails the test when the agent exited or deadline passed (with
// what() and the logs), else pauses before the next poll.
func pollAgain(t *testing.T, code <-chan int, logs *syncbuf.Buffer, deadline time.Time, what func() string) {
	t.Helper()
	select {
	case c := <-code:
		t.Fatalf("wasmlet run exited with %d:\n%s", c, logs.String())
	default:
	}
	if time.Now().After(deadline) {
		t.Fatalf("%s\nlogs:\n%s", what(), logs.String())
	}
	time.Sleep(50 * time.Millisecond)
}
