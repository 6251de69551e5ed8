package certificate

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

// testCA signs the fake API server's certificates.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: c, key: key}
}

// sign issues a certificate for the CSR, valid from now for lifetime.
func (ca *testCA) sign(req []byte, lifetime time.Duration, serial int64) ([]byte, error) {
	b, _ := pem.Decode(req)
	if b == nil {
		return nil, fmt.Errorf("no PEM in the CSR")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: csr.Subject, DNSNames: csr.DNSNames, IPAddresses: csr.IPAddresses,
		NotBefore: time.Now().Add(-time.Second), NotAfter: time.Now().Add(lifetime),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// fakeSigner is a fake clientset whose CSRs are answered at creation:
// approved and issued for lifetime, or denied.
type fakeSigner struct {
	*fake.Clientset
	created atomic.Int32
	mu      sync.Mutex
	signers []string // signer names of the CSRs made
}

func newFakeSigner(t *testing.T, ca *testCA, lifetime time.Duration, deny bool) *fakeSigner {
	f := &fakeSigner{Clientset: fake.NewClientset()}
	f.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		n := f.created.Add(1)
		f.mu.Lock()
		f.signers = append(f.signers, csr.Spec.SignerName)
		f.mu.Unlock()
		// The fake filters no list or watch by field selector: keep only
		// the newest CSR, which client-go's wait then sees alone.
		gvr := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
		for i := int32(1); i < n; i++ {
			_ = f.Tracker().Delete(gvr, "", fmt.Sprintf("%scsr%d", csr.GenerateName, i))
		}
		// The fake does not generate names; the API server would.
		csr.Name = fmt.Sprintf("%scsr%d", csr.GenerateName, n)
		csr.UID = types.UID("uid-" + csr.Name)
		if deny {
			csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue, Reason: "TestDenied", Message: "not this node",
			}}
			return false, nil, nil
		}
		cert, err := ca.sign(csr.Spec.Request, lifetime, int64(100+n))
		if err != nil {
			t.Errorf("sign CSR: %v", err)
			return true, nil, err
		}
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
			Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "AutoApproved", LastUpdateTime: metav1.Now(),
		}}
		csr.Status.Certificate = cert
		return false, nil, nil // the tracker stores the answered CSR
	})
	return f
}

func testLogger(buf *syncbuf.Buffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Debug})
}

// eventually polls f every 10 ms for up to 30 s (a margin no loaded
// machine breaks for work that takes milliseconds).
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeBootstrap(t *testing.T, path, server, token string) {
	t.Helper()
	user := "{}"
	if token != "" {
		user = "{token: " + token + "}"
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: %s
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, server, user)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadBootstrapKubeConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeBootstrap(t, good, "https://127.0.0.1:6443", "abcdef.0123456789abcdef")
	noToken := filepath.Join(dir, "notoken")
	writeBootstrap(t, noToken, "https://127.0.0.1:6443", "")
	noServer := filepath.Join(dir, "noserver")
	writeBootstrap(t, noServer, "", "abcdef.0123456789abcdef")
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: [: nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "dir-not-file")
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, want string
	}{
		{"valid", good, ""},
		{"missing", filepath.Join(dir, "missing"), "no such file"},
		{"no token", noToken, "no token"},
		{"no server", noServer, "no server"},
		{"malformed", garbage, garbage},
		{"a directory", unreadable, unreadable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := LoadBootstrapKubeConfig(tt.path)
			if tt.want == "" {
				if err != nil || rc.BearerToken != "abcdef.0123456789abcdef" {
					t.Fatalf("got %v, %v: want the token", rc, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("error %v: want one naming %s and saying %q", err, tt.path, tt.want)
			}
		})
	}
}

// bootstrapClient runs a Client that bootstraps against f in dir.
func bootstrapClient(t *testing.T, ctx context.Context, dir string, f *fakeSigner, rotate bool, log *syncbuf.Buffer) *Client {
	t.Helper()
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	if _, err := os.Stat(bootstrap); err != nil {
		writeBootstrap(t, bootstrap, "https://127.0.0.1:6443", "abcdef.0123456789abcdef")
	}
	c, err := NewClient(ctx, ClientConfig{
		KubeConfig: filepath.Join(dir, "kubelet.kubeconfig"), BootstrapKubeConfig: bootstrap,
		CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Rotate: rotate, RetryInterval: 10 * time.Millisecond,
		NewClientset: func(*rest.Config) (kubernetes.Interface, error) { return f, nil },
		Logger:       testLogger(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewClient_Bootstrap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	f := newFakeSigner(t, newTestCA(t), time.Hour, false)
	var log syncbuf.Buffer
	c := bootstrapClient(t, ctx, dir, f, true, &log)
	if c.Current() != nil {
		t.Fatal("a certificate before the manager ran")
	}
	runUntilCleanup(t, ctx, cancel, c)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := c.WaitForCertificate(wctx); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	leaf := c.Current().Leaf
	if leaf.Subject.CommonName != "system:node:n1" || len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != "system:nodes" {
		t.Errorf("certificate subject %v: want CN system:node:n1, O system:nodes", leaf.Subject)
	}
	f.mu.Lock()
	signers := append([]string(nil), f.signers...)
	f.mu.Unlock()
	if len(signers) != 1 || signers[0] != certificatesv1.KubeAPIServerClientKubeletSignerName {
		t.Errorf("CSRs made for signers %v: want one for %s", signers, certificatesv1.KubeAPIServerClientKubeletSignerName)
	}
	current := filepath.Join(dir, "pki", "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
		t.Errorf("%s: readlink %q %v: want a symlink to a dated file", current, target, err)
	}
	kc, err := os.ReadFile(filepath.Join(dir, "kubelet.kubeconfig"))
	if err != nil || !strings.Contains(string(kc), "client-certificate: "+current) || strings.Contains(string(kc), "token") {
		t.Errorf("kubeconfig %v: want the client certificate %s and no token:\n%s", err, current, kc)
	}
	if rc, _, why := validClientConfig(filepath.Join(dir, "kubelet.kubeconfig"), time.Now()); rc == nil {
		t.Errorf("written kubeconfig not valid: %s", why)
	}
	rc := c.RESTConfig()
	if rc.Host != "https://127.0.0.1:6443" || rc.Transport == nil || rc.BearerToken != "" || rc.CertFile != "" {
		t.Errorf("REST config host %q transport %v token %q cert %q: want the cluster, the rotating transport, no credentials", rc.Host, rc.Transport, rc.BearerToken, rc.CertFile)
	}

	// Restarted with the bootstrap kubeconfig gone: the certificate is
	// reused, no CSR.
	cancel()
	if err := os.Remove(filepath.Join(dir, "bootstrap.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	f2 := newFakeSigner(t, newTestCA(t), time.Hour, false)
	var log2 syncbuf.Buffer
	c2, err := NewClient(context.Background(), ClientConfig{
		KubeConfig: filepath.Join(dir, "kubelet.kubeconfig"), BootstrapKubeConfig: filepath.Join(dir, "bootstrap.kubeconfig"),
		CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Rotate: true,
		NewClientset: func(*rest.Config) (kubernetes.Interface, error) { return f2, nil },
		Logger:       testLogger(&log2),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cur := c2.Current(); cur == nil || cur.Leaf.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Fatalf("after restart current %v: want serial %s reused", cur, leaf.SerialNumber)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c2.Run(ctx2); close(done) }()
	time.Sleep(100 * time.Millisecond) // the manager would request at once if it had to
	cancel2()
	<-done
	if n := f2.created.Load(); n != 0 {
		t.Errorf("%d CSRs after restart with a valid certificate, want 0", n)
	}
	if !strings.Contains(log2.String(), "no bootstrap") {
		t.Errorf("log does not say the kubeconfig was reused:\n%s", log2.String())
	}
}

func TestNewClient_Rotates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSigner(t, newTestCA(t), 2*time.Second, false)
	var log syncbuf.Buffer
	c := bootstrapClient(t, ctx, t.TempDir(), f, true, &log)
	runUntilCleanup(t, ctx, cancel, c)
	eventually(t, "the first certificate", func() bool { return c.Current() != nil })
	first := c.Current().Leaf.SerialNumber
	// Renewed at 70-90 % of its 2 s.
	eventually(t, "a renewed certificate", func() bool {
		cur := c.Current()
		return cur != nil && cur.Leaf.SerialNumber.Cmp(first) != 0
	})
	eventually(t, "the rotation logged", func() bool {
		return strings.Contains(log.String(), "client certificate rotated: closing API connections")
	})
}

func TestNewClient_NoRotation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSigner(t, newTestCA(t), 2*time.Second, false)
	var log syncbuf.Buffer
	c := bootstrapClient(t, ctx, t.TempDir(), f, false, &log)
	runUntilCleanup(t, ctx, cancel, c)
	eventually(t, "the first certificate", func() bool { return c.Current() != nil })
	// Past the 70-90 % deadline of the 2 s certificate (and its expiry):
	// without rotation no second CSR is made.
	time.Sleep(3 * time.Second)
	if n := f.created.Load(); n != 1 {
		t.Errorf("%d CSRs without rotation, want 1", n)
	}
}

func TestNewClient_Denied(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSigner(t, newTestCA(t), time.Hour, true)
	var log syncbuf.Buffer
	c := bootstrapClient(t, ctx, t.TempDir(), f, true, &log)
	runUntilCleanup(t, ctx, cancel, c)
	eventually(t, "the denial logged", func() bool {
		s := log.String()
		return strings.Contains(s, "denied, reason: TestDenied") && strings.Contains(s, "csr=csr-csr1")
	})
	if c.Current() != nil {
		t.Errorf("a certificate although the CSR was denied")
	}
	// It keeps trying (client-go's back-off: 2 s, then doubling).
	eventually(t, "a second CSR", func() bool { return f.created.Load() >= 2 })
}

func TestNewClient_WaitsForBootstrapKubeConfig(t *testing.T) {
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	var log syncbuf.Buffer
	type result struct {
		c   *Client
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		c, err := NewClient(ctx, ClientConfig{
			KubeConfig: filepath.Join(dir, "kubelet.kubeconfig"), BootstrapKubeConfig: bootstrap,
			CertDir: filepath.Join(dir, "pki"), NodeName: "n1", RetryInterval: 10 * time.Millisecond,
			Logger: testLogger(&log),
		})
		done <- result{c, err}
	}()
	eventually(t, "the missing file logged twice", func() bool {
		return strings.Count(log.String(), "bootstrap kubeconfig "+bootstrap) >= 2
	})
	writeBootstrap(t, bootstrap, "https://127.0.0.1:6443", "")
	eventually(t, "the missing token logged", func() bool { return strings.Contains(log.String(), "no token") })
	writeBootstrap(t, bootstrap, "https://127.0.0.1:6443", "abcdef.0123456789abcdef")
	r := <-done
	if r.err != nil || r.c == nil {
		t.Fatalf("NewClient after the file was fixed: %v", r.err)
	}

	// Stopped while waiting: an error wrapping the context's.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel2() }()
	_, err := NewClient(ctx2, ClientConfig{
		KubeConfig: filepath.Join(dir, "other.kubeconfig"), BootstrapKubeConfig: filepath.Join(dir, "missing"),
		CertDir: filepath.Join(dir, "pki2"), NodeName: "n1", RetryInterval: 10 * time.Millisecond,
	})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("stopped while waiting: %v", err)
	}
}

func TestNewClient_NoKubeConfigNoBootstrap(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubelet.kubeconfig")
	_, err := NewClient(context.Background(), ClientConfig{KubeConfig: kc, CertDir: dir, NodeName: "n1", Rotate: true})
	if err == nil || !strings.Contains(err.Error(), kc) || !strings.Contains(err.Error(), "no bootstrap kubeconfig") {
		t.Errorf("error %v: want one naming %s and the missing bootstrap kubeconfig", err, kc)
	}
}

func TestServer_GetCertificate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSigner(t, newTestCA(t), time.Hour, false)
	var log syncbuf.Buffer
	s, err := NewServer(ServerConfig{
		CertDir: t.TempDir(), NodeName: "n1", DNSNames: []string{"host1"}, IPs: []net.IP{net.ParseIP("192.0.2.7")},
		Client: f, Logger: testLogger(&log),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCertificate(nil); err == nil || !strings.Contains(err.Error(), "kubelet-serving CSR") {
		t.Errorf("before issue: %v, want an error naming the pending CSR", err)
	}
	go s.Run(ctx)
	eventually(t, "the serving certificate", func() bool { c, err := s.GetCertificate(nil); return err == nil && c != nil })
	c, _ := s.GetCertificate(nil)
	if err := c.Leaf.VerifyHostname("host1"); err != nil {
		t.Errorf("serving certificate: %v", err)
	}
	if err := c.Leaf.VerifyHostname("192.0.2.7"); err != nil {
		t.Errorf("serving certificate: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.signers) != 1 || f.signers[0] != certificatesv1.KubeletServingSignerName {
		t.Errorf("CSR signers %v: want one %s", f.signers, certificatesv1.KubeletServingSignerName)
	}
}

func TestNewServer_NoAddresses(t *testing.T) {
	_, err := NewServer(ServerConfig{CertDir: t.TempDir(), NodeName: "n1", Client: fake.NewClientset()})
	if err == nil || !strings.Contains(err.Error(), "n1") {
		t.Errorf("error %v: want one naming the node", err)
	}
}

// runUntilCleanup runs c until the test ends, and waits for it to return
// (its certificate manager stopped) before the test's temporary
// directories are removed: a rotation still writing into one made its
// removal fail.
func runUntilCleanup(t *testing.T, ctx context.Context, cancel context.CancelFunc, c *Client) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}
