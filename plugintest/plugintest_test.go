package plugintest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
)

// TestPlugin_Everything runs the SDK's every export and import through the
// real host.
func TestPlugin_Everything(t *testing.T) {
	wasm := Build(t, "testdata/everything")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "pong") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	// A manifest so the HTTP allow-list applies.
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	manifest := filepath.Join(t.TempDir(), "everything.plugin.yaml")
	err = os.WriteFile(manifest, []byte(fmt.Sprintf(`name: everything
version: 0.0.1
abi: v1
kinds: [admission, source, hook]
wasm: %s
sha256: %s
config: {greeting: hello, url: %q}
permissions: {allowedHosts: [%q]}
`, wasm, hex.EncodeToString(sum[:]), srv.URL+"/ping", u.Host)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	p := LoadWith(t, plugin.LoadConfig{Path: manifest, Config: plugin.Config{
		PoolSize: 1,
		Logger:   hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug}),
		NodeInfo: func(context.Context) (abi.NodeInfo, error) {
			return abi.NodeInfo{Name: "node-a", Labels: map[string]string{"zone": "z1"}}, nil
		},
	}})

	admit := func(name string) abi.AdmitResponse {
		t.Helper()
		return p.Admit([]byte(`{"metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"c","securityContext":{"privileged":true}}]}}`))
	}
	tests := []struct {
		pod, reason, message string
	}{
		{"config", "Config", "hello true"},
		{"count", "Count", "1"},
		{"count", "Count", "2"},
		{"http", "HTTP", "200 pong"},
		{"node", "Node", "node-a z1"},
		{"privileged", "Privileged", "c"},
	}
	for _, tt := range tests {
		if got := admit(tt.pod); got.Allowed || got.Reason != tt.reason || got.Message != tt.message {
			t.Errorf("pod %s: got %+v, want %s: %s", tt.pod, got, tt.reason, tt.message)
		}
	}
	if got := admit("log"); !got.Allowed || !strings.Contains(logs.String(), "hello from the guest") {
		t.Errorf("log: %+v; host log:\n%s", got, logs.String())
	}
	if _, err := p.AdmitRequest(abi.AdmitRequest{Pod: []byte(`{"metadata":{"name":"panic"}}`)}); err == nil || !strings.Contains(err.Error(), "plugin panicked: guest panic") {
		t.Errorf("panic: %v", err)
	}

	src, err := p.Source(abi.SourceRequest{Seq: 7})
	if err != nil || len(src.Updates) != 1 || src.Updates[0].Op != abi.OpSet || !strings.Contains(string(src.Updates[0].Pods[0]), "seq-7") {
		t.Errorf("source: %+v, %v", src, err)
	}
	hook, err := p.Hook(abi.HookRequest{Point: abi.HookPreCreate, Pod: []byte(`{"metadata":{"name":"p"}}`), Container: []byte(`{"name":"app"}`)})
	if err != nil || hook.Adjustment == nil || hook.Adjustment.Labels["container"] != "app" || hook.Adjustment.Labels["point"] != "PreCreate" || hook.Adjustment.Env[0].Name != "HOOKED" {
		t.Errorf("hook: %+v, %v", hook, err)
	}
}

// TestPlugin_HTTPDenied checks that a bare module (no manifest, so no
// allowed hosts) gets a denial through sdk.HTTP.
func TestPlugin_HTTPDenied(t *testing.T) {
	p := Load(t, Build(t, "testdata/everything"), map[string]string{"url": "http://127.0.0.1:1/"})
	got := p.Admit([]byte(`{"metadata":{"name":"http"}}`))
	if got.Reason != "HTTPError" || !strings.Contains(got.Message, "http GET http://127.0.0.1:1/") {
		t.Errorf("got %+v", got)
	}
}

func TestBuild_Error(t *testing.T) {
	if _, err := BuildGo("testdata/broken"); err == nil || !strings.Contains(err.Error(), "undefinedFunction") {
		t.Errorf("BuildGo on broken code: %v", err)
	}
}
