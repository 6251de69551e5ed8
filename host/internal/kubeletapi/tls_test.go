package kubeletapi

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

func TestSelfSignedServingCertificate(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		CertDir:       dir,
		NodeName:      "node-a",
		NodeIPs:       []string{"127.0.0.1", "fd00::7"},
		Anonymous:     true,
		Authorization: AuthorizationAlwaysAllow,
	}
	s, err := newServer(cfg, options{listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	runServer(t, s)

	certFile := filepath.Join(dir, "kubelet.crt")
	certs, err := certutil.CertsFromFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 2 {
		t.Fatalf("%d certificates in %s, want the leaf and its CA", len(certs), certFile)
	}
	leaf := certs[0]
	for _, name := range []string{"node-a", "127.0.0.1", "fd00::7"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("certificate not valid for %s: %v", name, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "kubelet.key")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("key file: %v, %v", fi, err)
	}

	// A client trusting the generated CA reaches the server by IP and by name.
	roots := x509.NewCertPool()
	roots.AddCert(certs[1])
	for _, serverName := range []string{"", "node-a"} {
		c := newTLSClient(roots, serverName)
		if code, body := get(t, c, "https://"+s.Addr().String()+"/healthz"); code != 200 || body != "ok" {
			t.Errorf("server name %q: %d %q", serverName, code, body)
		}
	}

	// Reused while valid for the node's names; replaced when they change.
	before, _ := os.ReadFile(certFile)
	if _, _, err := servingCertFiles(cfg); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certFile); !bytes.Equal(before, after) {
		t.Error("valid certificate regenerated")
	}
	cfg.NodeIPs = append(cfg.NodeIPs, "10.0.0.8")
	if _, _, err := servingCertFiles(cfg); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(certFile)
	if bytes.Equal(before, after) {
		t.Fatal("certificate not regenerated for a new node IP")
	}
	certs, err = certutil.ParseCertsPEM(after)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs[0].VerifyHostname("10.0.0.8"); err != nil {
		t.Error(err)
	}
}

func TestSelfSignedValid(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	if selfSignedValid(certFile, keyFile, "node-a", nil, time.Now()) {
		t.Error("missing files valid")
	}
	if err := writeSelfSigned(certFile, keyFile, "node-a", []net.IP{net.ParseIP("10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if !selfSignedValid(certFile, keyFile, "node-a", []net.IP{net.ParseIP("10.0.0.1")}, now) {
		t.Error("fresh certificate not valid")
	}
	if selfSignedValid(certFile, keyFile, "node-b", nil, now) {
		t.Error("valid for another node name")
	}
	if selfSignedValid(certFile, keyFile, "node-a", nil, now.Add(340*24*time.Hour)) {
		t.Error("valid a month before expiry")
	}
	os.WriteFile(keyFile, []byte("junk"), 0o600)
	if selfSignedValid(certFile, keyFile, "node-a", nil, now) {
		t.Error("valid with a broken key")
	}
}

func newTLSClient(roots *x509.CertPool, serverName string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}},
		Timeout:   deadline,
	}
}
