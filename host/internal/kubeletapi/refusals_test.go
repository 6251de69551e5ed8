package kubeletapi

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

// TestServer_clientCAInMemory: a client CA given as PEM (a kubeconfig's
// cluster CA) authenticates client certificates as a file does; the start
// names it and the authorization mode, and a refusal is logged with why.
func TestServer_clientCAInMemory(t *testing.T) {
	var out syncbuf.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	const source = "the cluster CA of kubeconfig /etc/kubernetes/kubelet.conf"
	e := startServer(t, nil, func(c *Config) {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			t.Fatal(err)
		}
		c.ClientCA, c.ClientCAFile, c.ClientCASource, c.Logger = pem, "", source, log
	})
	if code, body := get(t, e.client(t, "system:kube-apiserver"), "https://"+e.addr+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("certificate from the in-memory CA: %d %q, want 200 ok", code, body)
	}
	other := &env{serverCA: e.serverCA, clientCA: newTestCA(t, "other-ca")}
	if code, _ := get(t, other.client(t, "mallory"), "https://"+e.addr+"/healthz"); code != 401 {
		t.Errorf("foreign certificate: %d, want 401", code)
	}
	got := out.String()
	for _, want := range []string{
		`client_ca="` + source + `"`, "authorization_mode=AlwaysAllow",
		"kubelet API request refused", `reason="no client certificate issued by the client CA (` + source + `) and no bearer token, and anonymous requests are not allowed"`, "status=401",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

func TestRefusals_note(t *testing.T) {
	var out syncbuf.Buffer
	f := newRefusals(hclog.New(&hclog.LoggerOptions{Output: &out}))
	r := httptest.NewRequest("GET", "/containerLogs/default/web/app", nil)
	for range 8 {
		f.note(r, "", 401, f.unauthenticated(r, nil))
	}
	f.limit.SetLimit(1e9) // the next one is let through at once
	f.note(r, "bob", 403, "Forbidden (user=bob)")
	got := out.String()
	if n := strings.Count(got, "kubelet API request refused"); n != 6 {
		t.Errorf("%d lines logged, want 5 then 1:\n%s", n, got)
	}
	for _, want := range []string{
		"reason=\"no client CA is configured (--client-ca-file, or the cluster CA of --kubeconfig), so client certificates are not asked for",
		"refusals_not_logged=3", "user=bob", "status=403",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}
