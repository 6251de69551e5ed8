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
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-client/pkg/fake"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
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

// dur is a metav1.Duration for the tests' literals.
func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func TestLoadRunConfig(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join("testdata", "wasmlet.yaml")
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

	var d v1alpha1.WasmletConfiguration
	d.SetDefaults()
	tests := []struct {
		name    string
		args    []string
		check   func(v1alpha1.WasmletConfiguration) string // "" when right
		wantErr string
	}{
		{"defaults", []string{"--node-name", "n1"}, func(c v1alpha1.WasmletConfiguration) string {
			want := d
			want.NodeName = "n1"
			return differs(c, want)
		}, ""},
		{"default node name is the host name", nil, func(c v1alpha1.WasmletConfiguration) string {
			h, _ := os.Hostname()
			if c.NodeName != strings.ToLower(h) {
				return c.NodeName
			}
			return ""
		}, ""},
		{"flags", []string{"--node-name=N1", "--pod-manifest-path=/m", "--container-runtime-endpoint=unix:///c.sock",
			"--sync-frequency=10s", "--max-pods=7", "--read-only-port=0", "--log-level=warn", "--log-json"}, func(c v1alpha1.WasmletConfiguration) string {
			if c.NodeName != "n1" || c.StaticPodPath != "/m" || c.ContainerRuntimeEndpoint != "unix:///c.sock" || c.SyncFrequency != dur(10*time.Second) ||
				c.MaxPods != 7 || *c.ReadOnlyPort != 0 || c.LogLevel != "warn" || !c.LogJSON || c.RootDir != d.RootDir {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"file", []string{"--config", full}, func(c v1alpha1.WasmletConfiguration) string {
			want := v1alpha1.WasmletConfiguration{NodeName: "node-a", StaticPodPath: "/etc/wasmlet/manifests", FileCheckFrequency: dur(5 * time.Second),
				PodObjectsDir: "/etc/wasmlet/objects", Port: ptr.To(10251), PluginDir: "/etc/wasmlet/plugins",
				ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock", ImageServiceEndpoint: "unix:///run/images.sock",
				RuntimeRequestTimeout: dur(30 * time.Second), RootDir: "/srv/wasmlet", PodLogsDir: "/srv/logs", SyncFrequency: dur(30 * time.Second),
				HousekeepingInterval: dur(3 * time.Second), ContainerGCPeriod: dur(90 * time.Second), PLEGRelistPeriod: dur(500 * time.Millisecond),
				VolumeStatsAggPeriod: dur(20 * time.Second), MaxPods: 50, Address: "0.0.0.0", ReadOnlyPort: ptr.To(10256),
				LogLevel: "debug", LogJSON: true, KubeConfig: "/etc/wasmlet/node.kubeconfig",
				NodeStatusUpdateFrequency: dur(20 * time.Second), NodeStatusReportFrequency: dur(time.Minute),
				ClusterDNS: []string{"10.96.0.10"}, ResolvConf: ptr.To("/etc/wasmlet/resolv.conf"), CgroupsPerQOS: ptr.To(false),
				CgroupDriver: "systemd", CgroupRoot: "/wasmlet", ContainerLogMaxSize: "1Mi", ContainerLogMaxFiles: 3}
			want.Authentication.X509.ClientCAFile = "/etc/wasmlet/ca.crt"
			want.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeWebhook
			want.SetDefaults() // the fields the file leaves out
			if want.CertDir != "/srv/wasmlet/pki" || want.PluginIdleTimeout.Duration != 10*time.Second {
				return fmt.Sprintf("want itself: %+v", want)
			}
			return differs(c, want)
		}, ""},
		{"flags override the file", []string{"--max-pods", "9", "--config", full, "--root-dir=/r", "--log-json=false"}, func(c v1alpha1.WasmletConfiguration) string {
			if c.MaxPods != 9 || c.RootDir != "/r" || c.CertDir != "/r/pki" || c.LogJSON || c.SyncFrequency != dur(30*time.Second) || c.StaticPodPath != "/etc/wasmlet/manifests" {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"file sets a zero port", []string{"--config", readOnlyOff}, func(c v1alpha1.WasmletConfiguration) string {
			if *c.ReadOnlyPort != 0 || c.SyncFrequency != d.SyncFrequency {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"authentication and authorization blocks", []string{"--config", auth}, func(c v1alpha1.WasmletConfiguration) string {
			an, az := c.Authentication, c.Authorization
			if an.X509.ClientCAFile != "/etc/kubernetes/pki/ca.crt" || *an.Webhook.Enabled || an.Webhook.CacheTTL != dur(30*time.Second) || !*an.Anonymous.Enabled ||
				az.Mode != "AlwaysAllow" || az.Webhook.CacheAuthorizedTTL != dur(time.Minute) || az.Webhook.CacheUnauthorizedTTL != dur(5*time.Second) {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"flags override the blocks", []string{"--config", auth, "--client-ca-file=/f", "--anonymous-auth=false", "--authorization-mode=Webhook"}, func(c v1alpha1.WasmletConfiguration) string {
			an := c.Authentication
			if an.X509.ClientCAFile != "/f" || *an.Anonymous.Enabled || c.Authorization.Mode != "Webhook" || *an.Webhook.Enabled {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"a block and its flat field", []string{"--config", authTwice}, nil, "clientCAFile: Forbidden: the same setting as authentication.x509.clientCAFile"},
		{"unknown field in a block", []string{"--config", authTypo}, nil, "mdoe"},
		{"bad mode in a block", []string{"--config", authBadMode}, nil, `authorization.mode: Unsupported value: "RBAC"`},
		{"negative cache TTL", []string{"--config", authNegative}, nil, `authentication.webhook.cacheTTL: Invalid value: "-1s": must not be negative`},
		{"log rotation flags", []string{"--container-log-max-size=500Ki", "--container-log-max-files=2"}, func(c v1alpha1.WasmletConfiguration) string {
			if c.ContainerLogMaxSize != "500Ki" || c.ContainerLogMaxFiles != 2 {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"plugin idle timeout", []string{"--plugin-idle-timeout=1m"}, func(c v1alpha1.WasmletConfiguration) string {
			if c.PluginIdleTimeout.Duration != time.Minute {
				return fmt.Sprintf("PluginIdleTimeout %v", c.PluginIdleTimeout)
			}
			return ""
		}, ""},
		{"plugin idle timeout in the file", []string{"--config", writeFile(t, dir, "idle.yaml", "kind: WasmletConfiguration\npluginIdleTimeout: 0s\n")}, func(c v1alpha1.WasmletConfiguration) string {
			if c.PluginIdleTimeout.Duration != 0 {
				return fmt.Sprintf("PluginIdleTimeout %v", c.PluginIdleTimeout)
			}
			return ""
		}, ""},
		{"negative plugin idle timeout", []string{"--plugin-idle-timeout=-1s"}, nil, `pluginIdleTimeout: Invalid value: "-1s": must not be negative`},
		{"bad log size", []string{"--container-log-max-size=big"}, nil, `containerLogMaxSize: Invalid value: "big": is not a quantity`},
		{"zero log size", []string{"--container-log-max-size=0"}, nil, `containerLogMaxSize: Invalid value: "0": must be positive`},
		{"one log file", []string{"--container-log-max-files=1"}, nil, "containerLogMaxFiles: Invalid value: 1: must be at least 2"},
		{"bad log size in the file", []string{"--config", writeFile(t, dir, "logsize.yaml", "kind: WasmletConfiguration\ncontainerLogMaxSize: lots\n")}, nil, `containerLogMaxSize: Invalid value: "lots"`},
		{"unknown field", []string{"--config", typo}, nil, "staticPodPaht"},
		{"wrong kind", []string{"--config", wrongKind}, nil, `kind is "KubeletConfiguration"`},
		{"bad duration", []string{"--config", badDuration}, nil, "dur.yaml"},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil, "nope.yaml"},
		{"bad flag", []string{"--max-pod=1"}, nil, "max-pod"},
		{"negative duration", []string{"--sync-frequency=-1s"}, nil, `syncFrequency: Invalid value: "-1s": must be positive`},
		{"bad port", []string{"--read-only-port=70000"}, nil, "readOnlyPort: Invalid value: 70000: is not a port"},
		{"bad level", []string{"--log-level=loud"}, nil, `logLevel: Unsupported value: "loud"`},
		{"bad authorization mode", []string{"--authorization-mode=RBAC"}, nil, `authorization.mode: Unsupported value: "RBAC"`},
		{"key without certificate", []string{"--tls-private-key-file=/k"}, nil, "tlsCertFile: Required value"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
		{"bootstrapping rotates by default", []string{"--kubeconfig=/k", "--bootstrap-kubeconfig=/b", "--cert-dir=/pki", "--rotate-server-certificates"}, func(c v1alpha1.WasmletConfiguration) string {
			if c.BootstrapKubeConfig != "/b" || c.CertDir != "/pki" || !*c.RotateCertificates || !c.ServerTLSBootstrap {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"bootstrapping without rotation", []string{"--kubeconfig=/k", "--bootstrap-kubeconfig=/b", "--rotate-certificates=false"}, func(c v1alpha1.WasmletConfiguration) string {
			if *c.RotateCertificates {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"no rotation without bootstrapping", []string{"--kubeconfig=/k"}, func(c v1alpha1.WasmletConfiguration) string {
			if *c.RotateCertificates || c.ServerTLSBootstrap {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"certificate fields in the file", []string{"--bootstrap-kubeconfig=/b", "--config", writeFile(t, dir, "certs.yaml", "kind: WasmletConfiguration\nkubeconfig: /k\nrotateCertificates: false\nserverTLSBootstrap: true\n")}, func(c v1alpha1.WasmletConfiguration) string {
			if *c.RotateCertificates || !c.ServerTLSBootstrap || c.KubeConfig != "/k" {
				return fmt.Sprintf("%+v", c)
			}
			return ""
		}, ""},
		{"bootstrap without kubeconfig", []string{"--bootstrap-kubeconfig=/b"}, nil, `bootstrapKubeconfig: Invalid value: "/b": needs kubeconfig`},
		{"server rotation without kubeconfig", []string{"--rotate-server-certificates"}, nil, "serverTLSBootstrap: Invalid value: true: needs kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadRunConfig(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(c); msg != "" {
				t.Errorf("got %s", msg)
			}
		})
	}
}

// differs describes how got differs from want, or returns "".
func differs(got, want v1alpha1.WasmletConfiguration) string {
	if reflect.DeepEqual(got, want) {
		return ""
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return fmt.Sprintf("\n%s\nwant\n%s", g, w)
}

// TestLoadRunConfig_Precedence: a flag given beats the file, the file beats
// the default, for each kind of field (a value, a pointer whose zero means
// something, a block's field, a default derived from another field).
func TestLoadRunConfig_Precedence(t *testing.T) {
	tests := []struct {
		name                        string
		fileLine, arg               string // the field in the file, the flag
		get                         func(v1alpha1.WasmletConfiguration) any
		byDefault, fromFile, byFlag any
	}{
		{"duration", "syncFrequency: 30s", "--sync-frequency=10s",
			func(c v1alpha1.WasmletConfiguration) any { return c.SyncFrequency.Duration }, time.Minute, 30 * time.Second, 10 * time.Second},
		{"string", "rootDir: /file", "--root-dir=/flag",
			func(c v1alpha1.WasmletConfiguration) any { return c.RootDir }, "/var/lib/wasmlet", "/file", "/flag"},
		{"derived", "rootDir: /file", "--root-dir=/flag",
			func(c v1alpha1.WasmletConfiguration) any { return c.CertDir }, "/var/lib/wasmlet/pki", "/file/pki", "/flag/pki"},
		{"port zero in the file", "readOnlyPort: 0", "--read-only-port=1234",
			func(c v1alpha1.WasmletConfiguration) any { return *c.ReadOnlyPort }, 10255, 0, 1234},
		{"port zero as a flag", "readOnlyPort: 1234", "--read-only-port=0",
			func(c v1alpha1.WasmletConfiguration) any { return *c.ReadOnlyPort }, 10255, 1234, 0},
		{"bool", "cgroupsPerQOS: false", "--cgroups-per-qos",
			func(c v1alpha1.WasmletConfiguration) any { return *c.CgroupsPerQOS }, true, false, true},
		{"block by its flat name", "anonymousAuth: true", "--anonymous-auth=false",
			func(c v1alpha1.WasmletConfiguration) any { return *c.Authentication.Anonymous.Enabled }, false, true, false},
		{"block", "authorization: {mode: Webhook}", "--authorization-mode=AlwaysAllow",
			func(c v1alpha1.WasmletConfiguration) any { return string(c.Authorization.Mode) }, "AlwaysAllow", "Webhook", "AlwaysAllow"},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		file := writeFile(t, dir, fmt.Sprintf("%d.yaml", i), "kind: WasmletConfiguration\n"+tt.fileLine+"\n")
		for _, run := range []struct {
			name string
			args []string
			want any
		}{
			{"default", nil, tt.byDefault},
			{"file beats default", []string{"--config", file}, tt.fromFile},
			{"flag beats default", []string{tt.arg}, tt.byFlag},
			{"flag beats file", []string{tt.arg, "--config", file}, tt.byFlag},
		} {
			t.Run(tt.name+"/"+run.name, func(t *testing.T) {
				c, err := loadRunConfig(append([]string{"--node-name=n1"}, run.args...), io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if got := tt.get(c); got != run.want {
					t.Errorf("got %v (%T), want %v (%T)", got, got, run.want, run.want)
				}
			})
		}
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

// TestSetGCPercent: without GOGC the agent collects at DefaultGCPercent;
// a GOGC the operator set is left to the runtime, which applied it.
func TestSetGCPercent(t *testing.T) {
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	if got := setGCPercent(""); got != "50" {
		t.Fatalf("no GOGC: setting %q, want 50", got)
	}
	if now := debug.SetGCPercent(100); now != DefaultGCPercent {
		t.Fatalf("no GOGC: GC percent %d, want %d", now, DefaultGCPercent)
	}
	if got := setGCPercent("200"); got != "200" {
		t.Fatalf("GOGC=200: setting %q", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("GOGC=200: the agent changed the GC percent to %d", now)
	}
}
