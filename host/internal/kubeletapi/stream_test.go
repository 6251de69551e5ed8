package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseStreamOptions(t *testing.T) {
	tests := []struct {
		query   string
		want    streamOptions
		wantErr bool
	}{
		{query: "output=1", want: streamOptions{stdout: true}},
		{query: "input=1&output=1&error=1", want: streamOptions{stdin: true, stdout: true, stderr: true}},
		{query: "input=true&output=TRUE&error=True", want: streamOptions{stdin: true, stdout: true, stderr: true}},
		{query: "input=1&tty=1", want: streamOptions{stdin: true, tty: true}},
		// A tty carries both outputs: stderr is dropped, as the kubelet does.
		{query: "output=1&error=1&tty=1", want: streamOptions{stdout: true, tty: true}},
		{query: "output=0&error=false&input=yes", wantErr: true},
		{query: "tty=1", wantErr: true},
		{query: "error=1&tty=1", wantErr: true}, // nothing left once stderr is dropped
		{query: "", wantErr: true},
		{query: "command=ls", wantErr: true},
		// Only the first value counts.
		{query: "output=1&output=0", want: streamOptions{stdout: true}},
	}
	for _, tc := range tests {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseStreamOptions(q)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error = %v, want error %v", tc.query, err, tc.wantErr)
			continue
		}
		if err != nil {
			if err.Error() != "you must specify at least 1 of stdin, stdout, stderr" {
				t.Errorf("%q: error = %q", tc.query, err)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%q = %+v, want %+v", tc.query, got, tc.want)
		}
	}
}

// fakeStreaming answers with URLs on base that carry the request (the
// session) in their query, records the calls, and fails with err when set.
type fakeStreaming struct {
	base *url.URL

	mu     sync.Mutex
	calls  []string
	err    error
	runOut []byte
	runErr error
}

func (f *fakeStreaming) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.err
}

func (f *fakeStreaming) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeStreaming) lastCall() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return ""
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeStreaming) sessionURL(path string, q url.Values) *url.URL {
	u := *f.base
	u.Path, u.RawQuery = path, q.Encode()
	return &u
}

func streamsQuery(stdin, stdout, stderr, tty bool) url.Values {
	q := url.Values{}
	for name, on := range map[string]bool{"input": stdin, "output": stdout, "error": stderr, "tty": tty} {
		if on {
			q.Set(name, "1")
		}
	}
	return q
}

func (f *fakeStreaming) ExecURL(_ context.Context, pod *v1.Pod, container string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	if err := f.record(fmt.Sprintf("exec %s/%s/%s %q input=%v output=%v error=%v tty=%v", pod.Namespace, pod.Name, container, cmd, stdin, stdout, stderr, tty)); err != nil {
		return nil, err
	}
	q := streamsQuery(stdin, stdout, stderr, tty)
	q["command"] = cmd
	return f.sessionURL("/exec/session-token", q), nil
}

func (f *fakeStreaming) AttachURL(_ context.Context, pod *v1.Pod, container string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	if err := f.record(fmt.Sprintf("attach %s/%s/%s input=%v output=%v error=%v tty=%v", pod.Namespace, pod.Name, container, stdin, stdout, stderr, tty)); err != nil {
		return nil, err
	}
	return f.sessionURL("/attach/session-token", streamsQuery(stdin, stdout, stderr, tty)), nil
}

func (f *fakeStreaming) PortForwardURL(_ context.Context, pod *v1.Pod, ports []int32) (*url.URL, error) {
	if err := f.record(fmt.Sprintf("portforward %s/%s %v", pod.Namespace, pod.Name, ports)); err != nil {
		return nil, err
	}
	return f.sessionURL("/portforward/session-token", nil), nil
}

func (f *fakeStreaming) RunInContainer(_ context.Context, pod *v1.Pod, container string, cmd []string, timeout time.Duration) ([]byte, error) {
	if err := f.record(fmt.Sprintf("run %s/%s/%s %q %v", pod.Namespace, pod.Name, container, cmd, timeout)); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runOut, f.runErr
}

// streamPods knows default/web (uid web-uid) with containers app, init,
// debug (ephemeral) and term (with a tty).
func streamPods(namespace, name string) (*v1.Pod, bool) {
	if namespace != "default" || name != "web" {
		return nil, false
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "web-uid"},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "init"}},
			Containers:          []v1.Container{{Name: "app"}, {Name: "term", TTY: true, Stdin: true}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", TTY: true}}},
		},
	}, true
}

// streamMux is the streaming endpoints without authentication, on a fake
// runtime whose URLs point at upstream (nothing listening, by default).
func streamMux(t *testing.T, f *fakeStreaming) *http.ServeMux {
	t.Helper()
	if f.base == nil {
		f.base = &url.URL{Scheme: "http", Host: "127.0.0.1:1"}
	}
	s := &Server{mux: http.NewServeMux(), log: hclog.NewNullLogger()}
	RegisterStreaming(s, f, streamPods)
	return s.mux
}

func serveStream(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestStreaming_requests(t *testing.T) {
	tests := []struct {
		name, method, target string
		runtimeErr           error
		wantCode             int
		wantBody             string // exact, unless empty
		wantCall             string // the runtime call made, "" for none
	}{
		// Bad parameters come first, as in the kubelet.
		{name: "no streams", method: "POST", target: "/exec/default/web/app?command=ls", wantCode: 400, wantBody: "you must specify at least 1 of stdin, stdout, stderr"},
		{name: "no streams for an unknown pod", method: "POST", target: "/exec/default/nope/app?command=ls", wantCode: 400},
		{name: "attach without streams", method: "GET", target: "/attach/default/web/app", wantCode: 400},
		{name: "bad port", method: "POST", target: "/portForward/default/web?port=http", wantCode: 400},
		{name: "port 0", method: "POST", target: "/portForward/default/web?port=0", wantCode: 400},
		{name: "empty port", method: "POST", target: "/portForward/default/web?port=", wantCode: 400},
		{name: "run without cmd", method: "POST", target: "/run/default/web/app", wantCode: 400, wantBody: `query parameter "cmd" is required`},

		// Unknown pods and containers.
		{name: "unknown pod", method: "POST", target: "/exec/default/nope/app?command=ls&output=1", wantCode: 404, wantBody: `pod "nope" does not exist`},
		{name: "other namespace", method: "GET", target: "/exec/kube-system/web/app?command=ls&output=1", wantCode: 404},
		{name: "unknown container", method: "POST", target: "/exec/default/web/nope?command=ls&output=1", wantCode: 404, wantBody: `container "nope" not found in pod "web"`},
		{name: "other uid", method: "POST", target: "/exec/default/web/other-uid/app?command=ls&output=1", wantCode: 404, wantBody: `pod "web" does not exist`},
		{name: "attach unknown container", method: "POST", target: "/attach/default/web/nope?output=1", wantCode: 404},
		{name: "port-forward unknown pod", method: "POST", target: "/portForward/default/nope", wantCode: 404},
		{name: "port-forward other uid", method: "GET", target: "/portForward/default/web/other-uid", wantCode: 404},
		{name: "run unknown pod", method: "POST", target: "/run/default/nope/app?cmd=ls", wantCode: 404},
		{name: "run unknown container", method: "POST", target: "/run/default/web/nope?cmd=ls", wantCode: 404},

		// Methods.
		{name: "PUT exec", method: "PUT", target: "/exec/default/web/app?command=ls&output=1", wantCode: 405},
		{name: "GET run", method: "GET", target: "/run/default/web/app?cmd=ls", wantCode: 405},

		// The runtime is asked; the request is not an upgrade, which the
		// proxy refuses with 500 as the kubelet's.
		{name: "exec not upgraded", method: "POST", target: "/exec/default/web/app?command=ls&command=-l&input=1&output=1&error=1&tty=1",
			wantCode: 500, wantBody: "Upgrade request required",
			wantCall: `exec default/web/app ["ls" "-l"] input=true output=true error=false tty=true`},
		{name: "exec with the uid", method: "GET", target: "/exec/default/web/web-uid/init?command=true&output=true",
			wantCode: 500, wantCall: `exec default/web/init ["true"] input=false output=true error=false tty=false`},
		{name: "exec into an ephemeral container", method: "POST", target: "/exec/default/web/debug?command=sh&input=1",
			wantCode: 500, wantCall: `exec default/web/debug ["sh"] input=true output=false error=false tty=false`},
		// attach takes the tty from the container spec.
		{name: "attach, no tty in the spec", method: "POST", target: "/attach/default/web/app?input=1&output=1&tty=1",
			wantCode: 500, wantCall: `attach default/web/app input=true output=true error=false tty=false`},
		{name: "attach, tty in the spec", method: "POST", target: "/attach/default/web/web-uid/term?input=1&output=1",
			wantCode: 500, wantCall: `attach default/web/term input=true output=true error=false tty=true`},
		{name: "port-forward without ports", method: "POST", target: "/portForward/default/web",
			wantCode: 500, wantCall: `portforward default/web []`},
		{name: "port-forward with ports", method: "GET", target: "/portForward/default/web/web-uid?port=80&port=8080,9090",
			wantCode: 500, wantCall: `portforward default/web [80 8080 9090]`},

		// Runtime errors.
		{name: "not running", method: "POST", target: "/exec/default/web/app?command=ls&output=1",
			runtimeErr: errors.New(`container "app" in pod "web" is not running`),
			wantCode:   500, wantBody: `container "app" in pod "web" is not running`, wantCall: `exec default/web/app ["ls"] input=false output=true error=false tty=false`},
		{name: "runtime NotFound", method: "POST", target: "/attach/default/web/app?output=1",
			runtimeErr: fmt.Errorf("runtime: attach: %w", grpcstatus.Error(codes.NotFound, "no such container")),
			wantCode:   404, wantCall: `attach default/web/app input=false output=true error=false tty=false`},
		{name: "ErrNotFound", method: "POST", target: "/portForward/default/web",
			runtimeErr: PodNotFound("web"), wantCode: 404, wantBody: `pod "web" does not exist`, wantCall: `portforward default/web []`},
		{name: "too many sessions", method: "POST", target: "/exec/default/web/app?command=ls&output=1",
			runtimeErr: grpcstatus.Error(codes.ResourceExhausted, "maximum number of in-flight requests exceeded"),
			wantCode:   429, wantCall: `exec default/web/app ["ls"] input=false output=true error=false tty=false`},
		{name: "run fails", method: "POST", target: "/run/default/web/app?cmd=false",
			runtimeErr: errors.New("command 'false' exited with 1: "), wantCode: 500, wantBody: "command 'false' exited with 1: ",
			wantCall: `run default/web/app ["false"] 0s`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeStreaming{err: tc.runtimeErr}
			rec := serveStream(streamMux(t, f), tc.method, tc.target)
			if rec.Code != tc.wantCode {
				t.Errorf("%s %s = %d %q, want %d", tc.method, tc.target, rec.Code, rec.Body, tc.wantCode)
			}
			if tc.wantBody != "" && rec.Body.String() != tc.wantBody {
				t.Errorf("body = %q, want %q", rec.Body, tc.wantBody)
			}
			if got := f.lastCall(); got != tc.wantCall {
				t.Errorf("runtime call = %q, want %q", got, tc.wantCall)
			}
			if tc.wantCode == 429 && rec.Header().Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		})
	}
}

func TestStreaming_run(t *testing.T) {
	f := &fakeStreaming{runOut: []byte("hello\nworld\n")}
	mux := streamMux(t, f)
	rec := serveStream(mux, "POST", "/run/default/web/web-uid/app?cmd="+url.QueryEscape("echo  hello world"))
	if rec.Code != 200 || rec.Body.String() != "hello\nworld\n" {
		t.Errorf("run = %d %q", rec.Code, rec.Body)
	}
	// The command is split at each space, as the kubelet does.
	if got, want := f.lastCall(), `run default/web/app ["echo" "" "hello" "world"] 0s`; got != want {
		t.Errorf("call = %s, want %s", got, want)
	}
	// No output: 200, empty.
	f.runOut = nil
	if rec := serveStream(mux, "POST", "/run/default/web/app?cmd=true"); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("run without output = %d %q", rec.Code, rec.Body)
	}
}

// TestStreaming_proxiesUpgrade checks that an upgrade request reaches the
// URL the runtime answered, with the session's query and without the
// client's credentials, and that the upstream's refusal is passed back.
func TestStreaming_proxiesUpgrade(t *testing.T) {
	type seen struct {
		uri, auth, upgrade string
	}
	got := make(chan seen, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Upgrade")}
		writeText(w, http.StatusForbidden, "session expired")
	}))
	t.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	f := &fakeStreaming{base: base}
	srv := httptest.NewServer(streamMux(t, f))
	t.Cleanup(srv.Close)

	req, err := http.NewRequest("POST", srv.URL+"/exec/default/web/app?command=ls&output=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Set("Authorization", "Bearer secret")
	c := &http.Client{Timeout: deadline}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || string(body) != "session expired" {
		t.Errorf("answer = %d %q, want the upstream's 403", resp.StatusCode, body)
	}
	select {
	case s := <-got:
		if s.uri != "/exec/session-token?command=ls&output=1" || s.auth != "" || s.upgrade != "SPDY/3.1" {
			t.Errorf("upstream saw %+v", s)
		}
	case <-time.After(deadline):
		t.Fatal("the upstream saw no request")
	}
}

// TestStreaming_upstreamDown: the runtime's streaming server cannot be
// dialled; the answer is 500, before any upgrade.
func TestStreaming_upstreamDown(t *testing.T) {
	srv := httptest.NewServer(streamMux(t, &fakeStreaming{}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest("POST", srv.URL+"/portForward/default/web", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	resp, err := (&http.Client{Timeout: deadline}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), "error dialing backend") {
		t.Errorf("answer = %d %q", resp.StatusCode, body)
	}
}
