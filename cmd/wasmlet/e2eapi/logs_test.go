//go:build e2e_apiserver

package e2eapi

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// `kubectl logs` through the API server reaches the node's kubelet API:
// the whole log, tailLines, follow; and the kubelet API itself refuses a
// request without credentials (401) and one whose user may not proxy to
// the node (403, decided by SubjectAccessReview).
func testContainerLogs(t *testing.T, a *agent) {
	ctx, cancel := ctxT(2 * time.Minute)
	defer cancel()
	createPod(t, newPod("talker", "echo", "first", ";", "echo", "second", ";", "log", "300ms", "tick"))
	p := waitPod(t, "default", "talker", 90*time.Second, "Running", harness.Running)
	waitLog(t, a, p, "main", "tick 3", 30*time.Second)

	logs := admin.CoreV1().Pods("default")
	whole, err := logs.GetLogs("talker", &v1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GetLogs through the API server: %v", err)
	}
	if !strings.HasPrefix(string(whole), "first\nsecond\ntick 1\n") {
		t.Errorf("whole log starts %q, want first, second, tick 1", harness.Tail(string(whole), 5))
	}
	tail, err := logs.GetLogs("talker", &v1.PodLogOptions{TailLines: ptr.To(int64(1))}).DoRaw(ctx)
	if err != nil || strings.Count(string(tail), "\n") != 1 || !strings.HasPrefix(string(tail), "tick ") {
		t.Errorf("tailLines=1: %q, %v; want one tick line", tail, err)
	}
	// Follow: lines keep coming after the call started.
	stream, err := logs.GetLogs("talker", &v1.PodLogOptions{Follow: true, TailLines: ptr.To(int64(0))}).Stream(ctx)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	sc := bufio.NewScanner(stream)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "tick ") {
		t.Errorf("follow: first line %q, %v; want a new tick", sc.Text(), sc.Err())
	}
	stream.Close()

	// Straight to the kubelet API: with the API server's client
	// certificate (x509), a container the pod does not have is a 404.
	base := fmt.Sprintf("https://127.0.0.1:%d/containerLogs/default/talker/", a.apiPort)
	cert, err := tls.LoadX509KeyPair(filepath.Join(*clusterFlag, "pki", "admin.crt"), filepath.Join(*clusterFlag, "pki", "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	for container, want := range map[string]int{"main?tailLines=1": http.StatusOK, "nope": http.StatusNotFound} {
		resp, err := withCert.Get(base + container)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s with a client certificate: %d %s, want %d", container, resp.StatusCode, b, want)
		}
	}

	url := base + "main"
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d %s, want 401", code, body)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(tr.Status.Token); code != http.StatusForbidden || !strings.Contains(body, "user=system:serviceaccount:default:default") || !strings.Contains(body, "proxy") {
		t.Errorf("a ServiceAccount without rights: %d %s, want 403 naming the user and nodes/proxy", code, body)
	}
	if flags.Runtime == "containerd" {
		// `kubectl exec` through the API server (websockets, which it
		// turns into SPDY towards the node) reaches the container.
		req := admin.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("talker").SubResource("exec").
			VersionedParams(&v1.PodExecOptions{Container: "main", Command: []string{"/testbox", "echo", "from", "exec"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		exec, err := remotecommand.NewWebSocketExecutor(adminConfig, "GET", req.URL().String())
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr strings.Builder
		if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
			t.Errorf("exec: %v (stderr %q)", err, stderr.String())
		} else if stdout.String() != "from exec\n" {
			t.Errorf("exec stdout %q, want %q", stdout.String(), "from exec\n")
		}
	}
	deletePod(t, "talker")
}
