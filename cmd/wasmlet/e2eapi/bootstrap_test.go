//go:build e2e_apiserver

package e2eapi

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// bootNode is the node that joins with a bootstrap token only.
const bootNode = "wasmlet-boot"

// TestTLSBootstrap joins a second node that starts with only a bootstrap
// kubeconfig (containerd's control plane is the bootstrap flavor:
// --enable-bootstrap-token-auth, kube-controller-manager's CSR approver
// and signer with short certificates; hack/e2e-apiserver.sh):
//  1. the node's client certificate comes from an auto-approved
//     kube-apiserver-client-kubelet CSR made with the token; the node
//     registers, turns Ready, runs a pod, and kubectl logs reaches it;
//  2. its kubelet API serves a certificate from a kubelet-serving CSR that
//     the test approves, as an operator would;
//  3. the client certificate is renewed before it expires, and the node
//     keeps renewing its Lease after the first certificate has expired;
//  4. restarted with the bootstrap token deleted, it reuses its
//     certificate (no bootstrap).
func TestTLSBootstrap(t *testing.T) {
	if flags.Runtime != "containerd" {
		t.Skipf("the TLS bootstrap flavor of the control plane is containerd's; not run on %s", flags.Runtime)
	}
	ctx, cancel := ctxT(15 * time.Minute)
	defer cancel()
	dir := filepath.Join(flags.Base, "boot")
	certDir := filepath.Join(dir, "pki")
	kubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	bootstrap := filepath.Join(dir, "bootstrap.kubeconfig")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tokenID := randomString(t, 6)
	bootstrapRBAC(t, ctx)
	createBootstrapToken(t, ctx, tokenID, randomString(t, 16), bootstrap)

	stopApprover := approveServingCSRs(t, "system:node:"+bootNode)
	a := &agent{Agent: harness.NewAgent(t, harness.AgentConfig{
		Name: "wasmlet-boot", Dir: filepath.Join(dir, "agent"), Binary: flags.Wasmlet, Suite: "e2eapi",
	}), apiPort: harness.FreePort(t)}
	args := []string{"--node-name", bootNode,
		"--bootstrap-kubeconfig", bootstrap, "--kubeconfig", kubeconfig, "--cert-dir", certDir,
		"--rotate-server-certificates",
		"--port", strconv.Itoa(a.apiPort), "--client-ca-file", filepath.Join(*clusterFlag, "pki", "ca.crt"),
		"--container-runtime-endpoint", flags.Endpoint, "--log-level", "debug"}
	a.Start(t, args...)
	t.Cleanup(func() {
		stopApprover()
		if t.Failed() {
			t.Logf("wasmlet-boot log tail:\n%s", a.LogTail(80))
		}
		a.Stop(t)
	})

	// 1. The client certificate, its CSR, the kubeconfig written.
	current := filepath.Join(certDir, "kubelet-client-current.pem")
	first := waitCert(t, current, nil)
	target, err := os.Readlink(current)
	if err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") || filepath.Base(target) == "kubelet-client-current.pem" {
		t.Errorf("%s: want a symlink to a dated kubelet-client-<time>.pem, readlink %q %v", current, target, err)
	}
	if first.Subject.CommonName != "system:node:"+bootNode || len(first.Subject.Organization) != 1 || first.Subject.Organization[0] != "system:nodes" || first.Issuer.CommonName != "wasmlet-e2e-ca" {
		t.Errorf("client certificate subject %v issuer %v: want CN system:node:%s, O system:nodes, by the cluster CA", first.Subject, first.Issuer, bootNode)
	}
	kc, err := os.ReadFile(kubeconfig)
	if err != nil || !strings.Contains(string(kc), "client-certificate: "+current) || !strings.Contains(string(kc), "client-key: "+current) {
		t.Errorf("kubeconfig %s: want client-certificate and client-key %s; got %v\n%s", kubeconfig, current, err, kc)
	}
	bootCSR := findCSR(t, ctx, certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:"+tokenID, first)
	if reason := approvedBy(bootCSR); reason != "AutoApproved" {
		t.Errorf("CSR %s: approval reason %q, want kube-controller-manager's AutoApproved", bootCSR.Name, reason)
	}
	t.Logf("figure: bootstrap CSR %s by %s; client certificate serial %s, lifetime %s (NotBefore %s, NotAfter %s)",
		bootCSR.Name, bootCSR.Spec.Username, first.SerialNumber, first.NotAfter.Sub(first.NotBefore), first.NotBefore.UTC().Format(time.RFC3339), first.NotAfter.UTC().Format(time.RFC3339))

	// The node registers, turns Ready, runs a pod, kubectl logs reaches it.
	waitBootNodeReady(t, time.Time{})
	pod := newPod("boot-log", "log", "200ms", "hello-from-boot")
	pod.Spec.NodeName = bootNode
	createPod(t, pod)
	defer func() {
		dctx, dcancel := ctxT(time.Minute)
		defer dcancel()
		admin.CoreV1().Pods("default").Delete(dctx, "boot-log", metav1.DeleteOptions{})
	}()
	waitPod(t, "default", "boot-log", 90*time.Second, "Running", harness.Running)
	checkBootLogs(t)

	// 2. The serving certificate from an approved kubelet-serving CSR.
	caPool := clusterCAPool(t)
	served := waitServedCert(t, a.apiPort, nil)
	node, err := admin.CoreV1().Nodes().Get(ctx, bootNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ad := range node.Status.Addresses {
		if err := served.VerifyHostname(ad.Address); err != nil {
			t.Errorf("serving certificate: node address %s %s: %v", ad.Type, ad.Address, err)
		}
	}
	if _, err := served.Verify(x509.VerifyOptions{Roots: caPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify against the cluster CA for server auth: %v", err)
	}
	servingCSR := findCSR(t, ctx, certificatesv1.KubeletServingSignerName, "system:node:"+bootNode, served)
	t.Logf("figure: serving CSR %s (approved by the test) serial %s, SANs %v %v", servingCSR.Name, served.SerialNumber, served.DNSNames, served.IPAddresses)

	// 3. The client certificate is renewed before it expires.
	rotated := waitCert(t, current, first)
	renewCSR := findCSR(t, ctx, certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:"+bootNode, rotated)
	if reason := approvedBy(renewCSR); reason != "AutoApproved" {
		t.Errorf("renewal CSR %s: approval reason %q, want AutoApproved", renewCSR.Name, reason)
	}
	if !rotated.NotBefore.Before(first.NotAfter) || renewCSR.CreationTimestamp.After(first.NotAfter) {
		t.Errorf("renewal CSR %s made at %s, new certificate from %s: want both before the first expired (%s)", renewCSR.Name, renewCSR.CreationTimestamp.UTC(), rotated.NotBefore.UTC(), first.NotAfter.UTC())
	}
	lifetime := first.NotAfter.Sub(first.NotBefore)
	at := renewCSR.CreationTimestamp.Sub(first.NotBefore)
	t.Logf("figure: client certificate %s renewed by CSR %s at %s of its %s lifetime (%.0f %%), new serial %s, expiring %s",
		first.SerialNumber, renewCSR.Name, at.Round(time.Second), lifetime, 100*at.Seconds()/lifetime.Seconds(), rotated.SerialNumber, rotated.NotAfter.UTC().Format(time.RFC3339))
	harness.Eventually(t, time.Minute, "agent log: client certificate rotated", func() (bool, string) {
		return a.LogContains("client certificate rotated: closing API connections"), harness.Tail(a.LogTail(5), 5)
	})
	// After the first certificate expired, only the new one authenticates:
	// the Lease keeps being renewed and the node stays Ready.
	if d := time.Until(first.NotAfter); d > 0 {
		t.Logf("waiting %s for the first client certificate to expire", d.Round(time.Second))
		time.Sleep(d + 2*time.Second)
	}
	waitBootNodeReady(t, first.NotAfter)
	checkBootLogs(t)
	// The serving certificate is renewed too (its CSRs approved as they come).
	served2 := waitServedCert(t, a.apiPort, served)
	t.Logf("figure: serving certificate renewed: serial %s -> %s", served.SerialNumber, served2.SerialNumber)

	// 4. Restarted without a bootstrap token, the node reuses its
	// certificate: no CSR by system:bootstrap:<id> after the restart.
	if err := admin.CoreV1().Secrets("kube-system").Delete(ctx, "bootstrap-token-"+tokenID, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Stop(t)
	restart := time.Now()
	reused := waitCert(t, current, nil)
	a.Start(t, args...)
	logs, _ := os.ReadFile(a.LogFile)
	afterRestart := string(logs)[strings.LastIndex(string(logs), "==== "):]
	if !strings.Contains(afterRestart, "kubeconfig holds a valid client certificate: no bootstrap") {
		t.Errorf("after the restart the agent did not reuse its client certificate (serial %s); log:\n%s", reused.SerialNumber, harness.Tail(afterRestart, 30))
	}
	waitBootNodeReady(t, restart)
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range csrs.Items {
		if c.Spec.Username == "system:bootstrap:"+tokenID && c.CreationTimestamp.After(restart) {
			t.Errorf("CSR %s made with the bootstrap token after the restart", c.Name)
		}
	}
}

// bootstrapRBAC binds the bootstrap roles as kubeadm does: bootstrappers
// may create CSRs and have them auto-approved; nodes have their renewals
// auto-approved.
func bootstrapRBAC(t *testing.T, ctx context.Context) {
	for _, b := range []struct{ name, group, role string }{
		{"wasmlet-e2e:node-bootstrapper", "system:bootstrappers", "system:node-bootstrapper"},
		{"wasmlet-e2e:node-autoapprove-bootstrap", "system:bootstrappers", "system:certificates.k8s.io:certificatesigningrequests:nodeclient"},
		{"wasmlet-e2e:node-autoapprove-certificate-rotation", "system:nodes", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"},
	} {
		_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: b.group}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// createBootstrapToken stores a bootstrap token as kubeadm does and
// writes a bootstrap kubeconfig with it.
func createBootstrapToken(t *testing.T, ctx context.Context, id, secret, path string) {
	_, err := admin.CoreV1().Secrets("kube-system").Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
		Type:       v1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true",
			"expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: wasmlet-e2e
  cluster: {server: %q, certificate-authority: %q}
users:
- name: bootstrap
  user: {token: %s.%s}
contexts:
- name: bootstrap
  context: {cluster: wasmlet-e2e, user: bootstrap}
current-context: bootstrap
`, adminConfig.Host, filepath.Join(*clusterFlag, "pki", "ca.crt"), id, secret)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// approveServingCSRs approves, as an operator would, every pending
// kubelet-serving CSR of user until the returned function is called.
func approveServingCSRs(t *testing.T, user string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			l, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, c := range l.Items {
					if c.Spec.SignerName != certificatesv1.KubeletServingSignerName || c.Spec.Username != user || len(c.Status.Conditions) > 0 {
						continue
					}
					c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
						Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "WasmletE2EOperator", Message: "approved by the e2e suite",
					})
					if _, err := admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, c.Name, &c, metav1.UpdateOptions{}); err == nil {
						t.Logf("approved serving CSR %s", c.Name)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// waitCert waits until the certificate in path is there and, with old,
// differs from it (a new serial).
func waitCert(t *testing.T, path string, old *x509.Certificate) *x509.Certificate {
	t.Helper()
	var got *x509.Certificate
	what := "client certificate in " + path
	timeout := 2 * time.Minute
	if old != nil {
		// Renewed at 70-90 % of its lifetime: wait the whole lifetime and
		// as much again.
		what = "client certificate renewed (serial " + old.SerialNumber.String() + ")"
		timeout = 2*old.NotAfter.Sub(old.NotBefore) + time.Minute
	}
	harness.Eventually(t, timeout, what, func() (bool, string) {
		certs, err := certutil.CertsFromFile(path)
		if err != nil {
			return false, err.Error()
		}
		got = certs[0]
		return old == nil || got.SerialNumber.Cmp(old.SerialNumber) != 0, "serial " + got.SerialNumber.String()
	})
	return got
}

// waitServedCert waits until the kubelet API on port serves a certificate
// (other than old) and returns it.
func waitServedCert(t *testing.T, port int, old *x509.Certificate) *x509.Certificate {
	t.Helper()
	var got *x509.Certificate
	timeout := 2 * time.Minute
	if old != nil {
		timeout = 2*old.NotAfter.Sub(old.NotBefore) + time.Minute
	}
	harness.Eventually(t, timeout, "kubelet API serving a certificate", func() (bool, string) {
		conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		got = conn.ConnectionState().PeerCertificates[0]
		return old == nil || got.SerialNumber.Cmp(old.SerialNumber) != 0, fmt.Sprintf("serial %s issuer %s", got.SerialNumber, got.Issuer)
	})
	return got
}

// findCSR is the CSR of signer and user whose issued certificate is cert.
func findCSR(t *testing.T, ctx context.Context, signer, user string, cert *x509.Certificate) certificatesv1.CertificateSigningRequest {
	t.Helper()
	l, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, c := range l.Items {
		seen = append(seen, fmt.Sprintf("%s(%s,%s)", c.Name, c.Spec.SignerName, c.Spec.Username))
		if c.Spec.SignerName != signer || c.Spec.Username != user || len(c.Status.Certificate) == 0 {
			continue
		}
		if issued, err := certutil.ParseCertsPEM(c.Status.Certificate); err == nil && issued[0].SerialNumber.Cmp(cert.SerialNumber) == 0 {
			return c
		}
	}
	t.Fatalf("no %s CSR by %s issued serial %s; CSRs: %v", signer, user, cert.SerialNumber, seen)
	return certificatesv1.CertificateSigningRequest{}
}

func approvedBy(c certificatesv1.CertificateSigningRequest) string {
	for _, x := range c.Status.Conditions {
		if x.Type == certificatesv1.CertificateApproved && x.Status == v1.ConditionTrue {
			return x.Reason
		}
	}
	return ""
}

// waitBootNodeReady waits until the boot node is Ready and its Lease was
// renewed after since.
func waitBootNodeReady(t *testing.T, since time.Time) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, "node "+bootNode+" Ready, Lease renewed after "+since.UTC().Format(time.RFC3339), func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		n, err := admin.CoreV1().Nodes().Get(ctx, bootNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
		}
		l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, bootNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ready && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since), fmt.Sprintf("ready %v, lease renewed %v", ready, l.Spec.RenewTime)
	})
}

// checkBootLogs is kubectl logs of the boot node's pod: the API server
// reaches the node's kubelet API, which authenticates and authorizes the
// request through the node's client certificate.
func checkBootLogs(t *testing.T) {
	t.Helper()
	harness.Eventually(t, time.Minute, "kubectl logs boot-log", func() (bool, string) {
		r := kubectl(t, time.Minute, "", "logs", "boot-log", "--tail", "3")
		return r.code == 0 && strings.Contains(r.stdout, "hello-from-boot"), fmt.Sprintf("exit %d stdout %q stderr %q", r.code, harness.Tail(r.stdout, 3), r.stderr)
	})
}

func clusterCAPool(t *testing.T) *x509.CertPool {
	t.Helper()
	certs, err := certutil.CertsFromFile(filepath.Join(*clusterFlag, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// randomString is n characters of [a-z0-9], a bootstrap token's alphabet.
func randomString(t *testing.T, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	for range n {
		i, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteByte(alphabet[i.Int64()])
	}
	return b.String()
}
