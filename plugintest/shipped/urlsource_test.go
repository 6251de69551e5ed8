package shipped

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/plugintest"
)

// webPodYAML is the pod the test server serves, with the YAML whose JSON
// form needs care: keys that are not strings, floats, YAML 1.1 booleans.
const webPodYAML = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {1: a, 2.5: b, true: c, 3.14159265358979: d}}\n" +
	"spec:\n  priority: 1.50\n  hostNetwork: yes\n  containers: [{name: web, image: nginx}]\n"

// TestURLSource_Wasm runs the compiled module through the real host against
// a loopback server: allowed host, ETag, a denied host.
func TestURLSource_Wasm(t *testing.T) {
	var hits, notModified atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("If-None-Match") == `"abc"` {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"abc"`)
		fmt.Fprint(w, webPodYAML)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	load := func(allowed string) *plugintest.Plugin {
		wasm := plugintest.Build(t, "../../plugins/url-source")
		b, err := os.ReadFile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "url-source.wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		mf := fmt.Sprintf("name: url-source\nversion: 1.0.0\nabi: v1\nkinds: [source]\nsha256: %s\nconfig: {url: %q}\npermissions: {allowedHosts: [%q]}\n",
			hex.EncodeToString(sum[:]), srv.URL+"/pods.yaml", allowed)
		path := filepath.Join(dir, "url-source.plugin.yaml")
		if err := os.WriteFile(path, []byte(mf), 0o644); err != nil {
			t.Fatal(err)
		}
		return plugintest.LoadWith(t, plugin.LoadConfig{Path: path})
	}
	p := load(u.Host)
	resp, err := p.Source(abi.SourceRequest{Seq: 1})
	if err != nil || len(resp.Updates) != 1 || len(resp.Updates[0].Pods) != 1 || resp.NextPollMillis != 20000 {
		t.Fatalf("first poll: %+v, %v", resp, err)
	}
	// The pod's JSON is what the host's own YAML reading gives, to the byte.
	if want, err := yaml.YAMLToJSON([]byte(webPodYAML)); err != nil || string(resp.Updates[0].Pods[0]) != string(want) {
		t.Errorf("pod JSON %s, want %s (%v)", resp.Updates[0].Pods[0], want, err)
	}
	resp, err = p.Source(abi.SourceRequest{Seq: 2})
	if err != nil || len(resp.Updates) != 0 || notModified.Load() != 1 {
		t.Fatalf("second poll: %+v, %v (304s: %d)", resp, err, notModified.Load())
	}
	denied := load("other.example:1")
	if _, err := denied.Source(abi.SourceRequest{Seq: 1}); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("a host outside allowedHosts: err = %v", err)
	}
	if hits.Load() != 2 {
		t.Errorf("server hits = %d, want 2 (the denied plugin must not reach it)", hits.Load())
	}
}
