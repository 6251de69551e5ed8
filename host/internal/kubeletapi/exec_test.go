package kubeletapi

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
	clientremotecommand "k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
)

// fakeStreamServer stands in for a runtime's streaming server (containerd's):
// /exec/... speaks the v4 remote command protocol over SPDY with the
// streams of the URL's query and runs its "command": "cat" copies stdin to
// stdout and writes "on stderr\n" to stderr, "exit N" exits with N.
// /portforward/... speaks portforward.k8s.io and echoes each data stream.
type fakeStreamServer struct {
	mu       sync.Mutex
	requests []*http.Request
}

func (f *fakeStreamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Clone(context.Background()))
	f.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/exec/"):
		f.exec(w, r)
	case strings.HasPrefix(r.URL.Path, "/portforward/"):
		f.portForward(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeStreamServer) seen() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.requests...)
}

// upgradeStream negotiates protocol and upgrades to SPDY; new streams
// arrive on the returned channel.
func upgradeStream(w http.ResponseWriter, r *http.Request, protocol string) (httpstream.Connection, <-chan httpstream.Stream) {
	if _, err := httpstream.Handshake(r, w, []string{protocol}); err != nil {
		return nil, nil
	}
	streams := make(chan httpstream.Stream, 16)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	return conn, streams
}

func (f *fakeStreamServer) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	conn, streams := upgradeStream(w, r, remotecommand.StreamProtocolV4Name)
	if conn == nil {
		return
	}
	defer conn.Close()
	want := map[string]bool{v1.StreamTypeError: true}
	// The proxy hands on the request's query, with the kubelet's names.
	for s, param := range map[string]string{v1.StreamTypeStdin: v1.ExecStdinParam, v1.StreamTypeStdout: v1.ExecStdoutParam, v1.StreamTypeStderr: v1.ExecStderrParam} {
		if q.Get(param) == "1" {
			want[s] = true
		}
	}
	got := map[string]httpstream.Stream{}
	timeout := make(chan struct{})
	stop := context.AfterFunc(r.Context(), func() { close(timeout) })
	defer stop()
	for len(got) < len(want) {
		select {
		case s := <-streams:
			got[s.Headers().Get(v1.StreamType)] = s
		case <-timeout:
			return
		}
	}
	cmd := q["command"]
	status := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case len(cmd) == 1 && cmd[0] == "cat":
		if in := got[v1.StreamTypeStdin]; in != nil {
			var out io.Writer = io.Discard
			if s := got[v1.StreamTypeStdout]; s != nil {
				out = s
			}
			io.Copy(out, in)
		}
		if s := got[v1.StreamTypeStderr]; s != nil {
			io.WriteString(s, "on stderr\n")
		}
	case len(cmd) == 2 && cmd[0] == "exit":
		status = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: cmd[1]}}}}
	default:
		status = metav1.Status{Status: metav1.StatusFailure, Message: "unknown command " + strconv.Quote(strings.Join(cmd, " "))}
	}
	for _, s := range []string{v1.StreamTypeStdout, v1.StreamTypeStderr} {
		if got[s] != nil {
			got[s].Close()
		}
	}
	json.NewEncoder(got[v1.StreamTypeError]).Encode(status)
	got[v1.StreamTypeError].Close()
}

// streamingEnv is a running Server with the streaming endpoints on a
// fakeStreaming whose URLs point at a fakeStreamServer.
type streamingEnv struct {
	*env
	st       *fakeStreaming
	upstream *fakeStreamServer

	mu    sync.Mutex
	attrs []authorizer.Attributes
}

func startStreaming(t *testing.T) *streamingEnv {
	t.Helper()
	e := &streamingEnv{env: &env{serverCA: newTestCA(t, "server-ca"), clientCA: newTestCA(t, "client-ca")}, upstream: &fakeStreamServer{}}
	up := httptest.NewServer(e.upstream)
	t.Cleanup(up.Close)
	base, _ := url.Parse(up.URL)
	e.st = &fakeStreaming{base: base}

	dir := t.TempDir()
	certPEM, keyPEM := e.serverCA.issue(t, &x509.Certificate{
		DNSNames: []string{"node-a"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	allow := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.attrs = append(e.attrs, a)
		return authorizer.DecisionAllow, "", nil
	})
	s, err := newServer(Config{
		TLSCertFile: writeFile(t, dir, "tls.crt", certPEM), TLSKeyFile: writeFile(t, dir, "tls.key", keyPEM),
		ClientCAFile: writeFile(t, dir, "ca.crt", e.clientCA.pem), NodeName: "node-a",
	}, options{authorizer: allow, listener: ln})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	RegisterStreaming(s, e.st, streamPods)
	e.addr = s.Addr().String()
	runServer(t, s)
	return e
}

// restConfig is a client config for the API server's identity: a client
// certificate, plus a bearer token that must not reach the runtime.
func (e *streamingEnv) restConfig(t *testing.T) *rest.Config {
	t.Helper()
	certPEM, keyPEM := e.clientCA.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return &rest.Config{
		Host:            "https://" + e.addr,
		BearerToken:     "secret-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: e.serverCA.pem, CertData: certPEM, KeyData: keyPEM, ServerName: "node-a"},
	}
}

func (e *streamingEnv) lastAttributes() authorizer.Attributes {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attrs[len(e.attrs)-1]
}

func (e *streamingEnv) exec(t *testing.T, path, query string, opts clientremotecommand.StreamOptions) error {
	t.Helper()
	ex, err := clientremotecommand.NewSPDYExecutor(e.restConfig(t), "POST", &url.URL{Scheme: "https", Host: e.addr, Path: path, RawQuery: query})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return ex.StreamWithContext(ctx, opts)
}

// TestStreaming_execOverSPDY runs `kubectl exec -i` as the API server does
// towards the kubelet: a SPDY upgrade through the server to the runtime's
// streaming server, stdin, stdout, stderr and the exit status all carried.
func TestStreaming_execOverSPDY(t *testing.T) {
	e := startStreaming(t)

	var stdout, stderr bytes.Buffer
	err := e.exec(t, "/exec/default/web/app", "command=cat&input=1&output=1&error=1",
		clientremotecommand.StreamOptions{Stdin: strings.NewReader("hello\nworld\n"), Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "hello\nworld\n" || stderr.String() != "on stderr\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if got, want := e.st.lastCall(), `exec default/web/app ["cat"] input=true output=true error=true tty=false`; got != want {
		t.Errorf("runtime call = %s, want %s", got, want)
	}
	reqs := e.upstream.seen()
	if len(reqs) != 1 {
		t.Fatalf("upstream saw %d requests", len(reqs))
	}
	if r := reqs[0]; r.URL.Path != "/exec/session-token" || r.Header.Get("Authorization") != "" || !httpstream.IsUpgradeRequest(r) {
		t.Errorf("upstream saw %s %s, headers %v", r.Method, r.URL, r.Header)
	}
	if a := e.lastAttributes(); a.GetVerb() != "create" || a.GetResource() != "nodes" || a.GetSubresource() != "proxy" || a.GetName() != "node-a" ||
		a.GetUser().GetName() != "kube-apiserver-kubelet-client" {
		t.Errorf("authorized %+v", a)
	}

	// A non-zero exit reaches the client as its exit code.
	err = e.exec(t, "/exec/default/web/web-uid/app", "command=exit&command=7&output=1", clientremotecommand.StreamOptions{Stdout: io.Discard})
	var exit clientexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 7 {
		t.Errorf("exit 7: %v", err)
	}
}

// TestStreaming_execRefused: the client sees the reason of a refusal
// before the upgrade (as `kubectl exec` prints it).
func TestStreaming_execRefused(t *testing.T) {
	e := startStreaming(t)
	e.st.setErr(errors.New(`container "app" in pod "web" is not running`))
	err := e.exec(t, "/exec/default/web/app", "command=cat&output=1", clientremotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `container "app" in pod "web" is not running`) {
		t.Errorf("not running: %v", err)
	}
	e.st.setErr(nil)
	err = e.exec(t, "/exec/default/nope/app", "command=cat&output=1", clientremotecommand.StreamOptions{Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `pod "nope" does not exist`) {
		t.Errorf("unknown pod: %v", err)
	}
	if n := len(e.upstream.seen()); n != 0 {
		t.Errorf("upstream saw %d requests", n)
	}
}
