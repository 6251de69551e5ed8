package kubeletapi

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// testCA is an in-test certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for tmpl's names and usages; it returns the
// certificate and key PEM.
func (ca *testCA) issue(t *testing.T, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeLogs serves log files by "namespace/pod/container".
type fakeLogs struct {
	mu      sync.Mutex
	files   map[string]string
	running atomic.Bool
}

func (l *fakeLogs) LogFile(_ context.Context, namespace, pod, container string, previous bool) (string, func() bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if namespace+"/"+pod == "default/waiting" {
		return "", nil, fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod)
	}
	prefix := namespace + "/" + pod + "/"
	known := false
	for k := range l.files {
		known = known || strings.HasPrefix(k, prefix)
	}
	if !known {
		return "", nil, PodNotFound(pod)
	}
	path, ok := l.files[prefix+container]
	if !ok {
		return "", nil, ContainerNotFound(container, pod)
	}
	if previous {
		return "", nil, fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
	}
	return path, l.running.Load, nil
}

// env is a running server with its CAs and a log file.
type env struct {
	addr     string
	serverCA *testCA
	clientCA *testCA
	logs     *fakeLogs
	logPath  string
}

// startServer runs a server on 127.0.0.1 with a serving certificate from an
// in-test CA, x509 client authentication against another, and cfgFn's
// changes.
func startServer(t *testing.T, authz authorizer.Authorizer, cfgFn func(*Config)) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{serverCA: newTestCA(t, "server-ca"), clientCA: newTestCA(t, "client-ca")}
	certPEM, keyPEM := e.serverCA.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "node-a"},
		DNSNames:    []string{"node-a"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	e.logPath = writeFile(t, dir, "0.log", []byte(criFile))
	e.logs = &fakeLogs{files: map[string]string{"default/web/app": e.logPath}}
	cfg := Config{
		TLSCertFile:   writeFile(t, dir, "tls.crt", certPEM),
		TLSKeyFile:    writeFile(t, dir, "tls.key", keyPEM),
		ClientCAFile:  writeFile(t, dir, "client-ca.crt", e.clientCA.pem),
		NodeName:      "node-a",
		Authorization: AuthorizationAlwaysAllow,
		Logs:          e.logs,
	}
	if cfgFn != nil {
		cfgFn(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(cfg, options{authorizer: authz, listener: ln})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	e.addr = s.Addr().String()
	runServer(t, s)
	return e
}

// runServer runs s until the test ends.
func runServer(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(deadline):
			t.Error("Run did not return")
		}
	})
}

// client is an HTTPS client trusting the server CA, with a client
// certificate for cn from the client CA unless cn is empty.
func (e *env) client(t *testing.T, cn string) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(e.serverCA.cert)
	tc := &tls.Config{RootCAs: roots, ServerName: "node-a"}
	if cn != "" {
		certPEM, keyPEM := e.clientCA.issue(t, &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: deadline}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestServer_logsWithClientCertificate(t *testing.T) {
	e := startServer(t, nil, nil)
	c := e.client(t, "system:kube-apiserver")
	base := "https://" + e.addr
	tests := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/healthz", 200, "ok"},
		{"/containerLogs/default/web/app", 200, "one\ntwo\nthree!\nfive\nsix\n\neight\n"},
		{"/containerLogs/default/web/app?tailLines=2&timestamps=true", 200, "2024-01-01T00:00:07.000000000Z \n2024-01-01T00:00:08.000000000Z eight\n"},
		{"/containerLogs/default/web/app?tail=1", 200, "eight\n"},
		{"/containerLogs/default/web/app?limitBytes=5", 200, "one\nt"},
		{"/containerLogs/default/web/app?stream=Stderr", 200, "two\nfive\n"},
		{"/containerLogs/default/web/app?sinceTime=2024-01-01T00:00:05Z", 200, "five\nsix\n\neight\n"},
		{"/containerLogs/default/web/app?sinceSeconds=60", 200, ""},
		{"/containerLogs/default/web/app?tailLines=x", 400, "unable to decode query: [tailLines: "},
		{"/containerLogs/default/web/app?limitBytes=-1", 400, "invalid request: limitBytes: Invalid value: -1: must be greater than 0"},
		{"/containerLogs/default/nope/app", 404, `pod "nope" does not exist`},
		{"/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`},
		{"/containerLogs/default/web/app?previous=true", 400, `previous terminated container "app" in pod "web" not found`},
		{"/containerLogs/default/waiting/app", 400, `container "app" in pod "waiting" is waiting to start: ContainerCreating`},
		{"/nothing", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		code, body := get(t, c, base+tt.path)
		if code != tt.wantCode || !strings.HasPrefix(body, tt.wantBody) || (code == 200 && body != tt.wantBody) {
			t.Errorf("GET %s: %d %q, want %d %q", tt.path, code, body, tt.wantCode, tt.wantBody)
		}
	}
}

func TestServer_noCredentials(t *testing.T) {
	e := startServer(t, nil, nil)
	for _, path := range []string{"/healthz", "/containerLogs/default/web/app"} {
		if code, body := get(t, e.client(t, ""), "https://"+e.addr+path); code != 401 || body != "Unauthorized" {
			t.Errorf("GET %s: %d %q, want 401 Unauthorized", path, code, body)
		}
	}
	// A certificate from another CA is no identity either.
	other := &env{serverCA: e.serverCA, clientCA: newTestCA(t, "other-ca")}
	if code, _ := get(t, other.client(t, "mallory"), "https://"+e.addr+"/healthz"); code != 401 {
		t.Errorf("foreign certificate: %d, want 401", code)
	}
}

func TestServer_anonymous(t *testing.T) {
	var seen atomic.Value
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		seen.Store(a.GetUser().GetName())
		return authorizer.DecisionAllow, "", nil
	})
	e := startServer(t, authz, func(c *Config) { c.Anonymous = true })
	if code, body := get(t, e.client(t, ""), "https://"+e.addr+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("anonymous: %d %q", code, body)
	}
	if got := seen.Load(); got != "system:anonymous" {
		t.Errorf("authorized user %v, want system:anonymous", got)
	}
}

func TestServer_forbidden(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, fmt.Sprintf("%s %s %s/%s %s", a.GetUser().GetName(), a.GetVerb(), a.GetResource(), a.GetSubresource(), a.GetName()))
		return authorizer.DecisionNoOpinion, "no", nil
	})
	e := startServer(t, authz, nil)
	c := e.client(t, "alice")
	tests := []struct {
		path, want string
		asked      []string
	}{
		{"/containerLogs/default/web/app", "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[proxy])\n",
			[]string{"alice get nodes/proxy node-a"}},
		{"/healthz", "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[healthz proxy])\n",
			[]string{"alice get nodes/healthz node-a", "alice get nodes/proxy node-a"}},
	}
	for _, tt := range tests {
		mu.Lock()
		asked = nil
		mu.Unlock()
		code, body := get(t, c, "https://"+e.addr+tt.path)
		if code != 403 || body != tt.want {
			t.Errorf("GET %s: %d %q, want 403 %q", tt.path, code, body, tt.want)
		}
		mu.Lock()
		if fmt.Sprint(asked) != fmt.Sprint(tt.asked) {
			t.Errorf("GET %s: asked %v, want %v", tt.path, asked, tt.asked)
		}
		mu.Unlock()
	}
}

func TestServer_authorizationError(t *testing.T) {
	authz := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, "", fmt.Errorf("webhook down")
	})
	e := startServer(t, authz, nil)
	code, body := get(t, e.client(t, "alice"), "https://"+e.addr+"/containerLogs/default/web/app")
	if code != 500 || body != "Authorization error (user=alice, verb=get, resource=nodes, subresource=proxy)" {
		t.Errorf("%d %q", code, body)
	}
}

func TestServer_followStreamsLines(t *testing.T) {
	e := startServer(t, nil, nil)
	e.logs.running.Store(true)
	resp, err := e.client(t, "alice").Get("https://" + e.addr + "/containerLogs/default/web/app?follow=true&tailLines=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended")
			}
			return l
		case <-time.After(deadline):
			t.Fatal("no line")
		}
		return ""
	}
	if l := next(); l != "eight" {
		t.Fatalf("first line %q", l)
	}
	appendLog(t, e.logPath, "2024-01-01T00:00:09Z stdout F nine\n")
	if l := next(); l != "nine" {
		t.Fatalf("appended line %q", l)
	}
	e.logs.running.Store(false)
	select {
	case l, ok := <-lines:
		if ok {
			t.Fatalf("line %q after the container stopped", l)
		}
	case <-time.After(deadline):
		t.Fatal("stream did not end when the container stopped")
	}
}

func TestServer_handle(t *testing.T) {
	e := &env{}
	dir := t.TempDir()
	e.serverCA, e.clientCA = newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	certPEM, keyPEM := e.serverCA.issue(t, &x509.Certificate{DNSNames: []string{"node-a"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deny := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "alice" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionDeny, "", nil
	})
	s, err := newServer(Config{
		TLSCertFile: writeFile(t, dir, "tls.crt", certPEM), TLSKeyFile: writeFile(t, dir, "tls.key", keyPEM),
		ClientCAFile: writeFile(t, dir, "ca.crt", e.clientCA.pem), NodeName: "node-a",
	}, options{authorizer: deny, listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("POST /exec/{namespace}/{pod}/{container}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "exec %s/%s/%s", r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"))
	}))
	e.addr = s.Addr().String()
	runServer(t, s)
	resp, err := e.client(t, "alice").Post("https://"+e.addr+"/exec/ns/p/c", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "exec ns/p/c" {
		t.Errorf("alice: %d %q", resp.StatusCode, body)
	}
	resp, err = e.client(t, "bob").Post("https://"+e.addr+"/exec/ns/p/c", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || string(body) != "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])\n" {
		t.Errorf("bob: %d %q", resp.StatusCode, body)
	}
	// Without Logs there is no /containerLogs.
	if code, _ := get(t, e.client(t, "alice"), "https://"+e.addr+"/containerLogs/default/web/app"); code != 404 {
		t.Errorf("containerLogs without Logs: %d", code)
	}
}

func TestNew_configErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	caFile := writeFile(t, dir, "ca.crt", ca.pem)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no authentication", Config{Authorization: AuthorizationAlwaysAllow, CertDir: dir}, "no authentication method configured"},
		{"webhook without client", Config{ClientCAFile: caFile, CertDir: dir}, "cannot use webhook authorization"},
		{"unknown mode", Config{ClientCAFile: caFile, Authorization: "RBAC", CertDir: dir}, `unknown mode "RBAC"`},
		{"missing CA file", Config{ClientCAFile: filepath.Join(dir, "nope"), Authorization: AuthorizationAlwaysAllow, CertDir: dir}, "client CA"},
		{"half a key pair", Config{ClientCAFile: caFile, Authorization: AuthorizationAlwaysAllow, TLSCertFile: caFile}, "must be set together"},
		{"no cert dir", Config{ClientCAFile: caFile, Authorization: AuthorizationAlwaysAllow}, "CertDir is required"},
		{"bad node IP", Config{ClientCAFile: caFile, Authorization: AuthorizationAlwaysAllow, CertDir: dir, NodeIPs: []string{"x"}}, `node IP "x"`},
	}
	for _, tt := range tests {
		_, err := newServer(tt.cfg, options{listener: closedListener{}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// closedListener stands in for a listener in configurations New refuses.
type closedListener struct{ net.Listener }
