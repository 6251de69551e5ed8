package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// Streaming is the container runtime side of exec, attach, port-forward
// and run (the runtime manager implements it). The first three return the
// URL of the runtime's streaming server for the session, to which the
// server proxies the client's upgraded (SPDY) connection, as the kubelet
// does since it stopped redirecting.
//
// An error wrapping ErrNotFound, or carrying the gRPC code NotFound, is
// answered 404; ResourceExhausted (the runtime's streaming server has too
// many sessions in flight) 429; any other error 500 with its text, as the
// kubelet answers "container ... is not running".
type Streaming interface {
	// ExecURL is the streaming URL for running cmd in the pod's
	// container with the given streams.
	ExecURL(ctx context.Context, pod *v1.Pod, container string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error)
	// AttachURL is the streaming URL for attaching to the pod's
	// container; tty is the container spec's.
	AttachURL(ctx context.Context, pod *v1.Pod, container string, stdin, stdout, stderr, tty bool) (*url.URL, error)
	// PortForwardURL is the streaming URL for forwarding ports of the
	// pod; ports are those of the request's query, often none (over SPDY
	// each stream names its port).
	PortForwardURL(ctx context.Context, pod *v1.Pod, ports []int32) (*url.URL, error)
	// RunInContainer runs cmd in the pod's container and returns its
	// output; timeout 0 means none.
	RunInContainer(ctx context.Context, pod *v1.Pod, container string, cmd []string, timeout time.Duration) ([]byte, error)
}

// RegisterStreaming adds the kubelet's streaming endpoints to s, behind its
// authentication and authorization (all are "nodes/proxy": get for GET,
// create for POST):
//
//	GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}?command=..&input=1&output=1&error=1&tty=1
//	GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1
//	GET|POST /portForward/{namespace}/{pod}[/{uid}][?port=..]
//	POST     /run/{namespace}/{pod}[/{uid}]/{container}?cmd=..
//
// pods finds a pod by namespace and name (the agent's pod manager); a pod it
// does not know, or whose UID is not the path's, is answered 404, and so is
// a container the pod's spec does not name. Bad query parameters are
// answered 400. exec, attach and portForward then ask st for the runtime's
// streaming URL and proxy the upgraded connection to it; a request that
// does not ask for an upgrade is refused. run answers 200 with the
// command's output (stdout then stderr), or 500 with the error.
//
// Call it once, before or while the server runs; it panics if the
// patterns are already registered.
func RegisterStreaming(s *Server, st Streaming, pods func(namespace, name string) (*v1.Pod, bool)) {
	h := &streamHandlers{st: st, pods: pods, log: s.log}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		s.Handle(method+" /exec/{namespace}/{pod}/{container}", http.HandlerFunc(h.exec))
		s.Handle(method+" /exec/{namespace}/{pod}/{uid}/{container}", http.HandlerFunc(h.exec))
		s.Handle(method+" /attach/{namespace}/{pod}/{container}", http.HandlerFunc(h.attach))
		s.Handle(method+" /attach/{namespace}/{pod}/{uid}/{container}", http.HandlerFunc(h.attach))
		s.Handle(method+" /portForward/{namespace}/{pod}", http.HandlerFunc(h.portForward))
		s.Handle(method+" /portForward/{namespace}/{pod}/{uid}", http.HandlerFunc(h.portForward))
	}
	s.Handle("POST /run/{namespace}/{pod}/{container}", http.HandlerFunc(h.run))
	s.Handle("POST /run/{namespace}/{pod}/{uid}/{container}", http.HandlerFunc(h.run))
}

// streamHandlers serves the streaming endpoints.
type streamHandlers struct {
	st   Streaming
	pods func(namespace, name string) (*v1.Pod, bool)
	log  hclog.Logger
}

// The query parameters of exec and attach (k8s.io/api/core/v1
// ExecStdinParam and so on) and of run and portForward.
const (
	streamCommandParam = "command"
	streamStdinParam   = v1.ExecStdinParam  // "input"
	streamStdoutParam  = v1.ExecStdoutParam // "output"
	streamStderrParam  = v1.ExecStderrParam // "error"
	streamTTYParam     = v1.ExecTTYParam    // "tty"
	streamRunCmdParam  = "cmd"
	streamPortParam    = "port"
)

// streamOptions are the streams an exec or attach asks for.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

// parseStreamOptions reads the streams of an exec or attach from its query,
// as the kubelet: each of input (stdin), output (stdout), error (stderr)
// and tty is on when its value is "1" (or "true"), at least one of stdin, stdout and stderr must
// be on, and stderr is dropped with a tty (the terminal carries both
// outputs; the runtime refuses the two together).
func parseStreamOptions(q url.Values) (streamOptions, error) {
	on := func(name string) bool {
		v := q.Get(name)
		return v == "1" || strings.EqualFold(v, "true")
	}
	o := streamOptions{stdin: on(streamStdinParam), stdout: on(streamStdoutParam), stderr: on(streamStderrParam), tty: on(streamTTYParam)}
	if o.tty {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return streamOptions{}, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// pod finds the request's pod, and checks that its spec names container
// (unless container is empty); it answers 404 and returns false when not.
func (h *streamHandlers) pod(w http.ResponseWriter, r *http.Request, container string) (*v1.Pod, bool) {
	name := r.PathValue("pod")
	p, ok := h.pods(r.PathValue("namespace"), name)
	if !ok || p == nil {
		writeText(w, http.StatusNotFound, PodNotFound(name).Error())
		return nil, false
	}
	if uid := r.PathValue("uid"); uid != "" && p.UID != types.UID(uid) {
		writeText(w, http.StatusNotFound, PodNotFound(name).Error())
		return nil, false
	}
	if container != "" && !hasContainer(p, container) {
		writeText(w, http.StatusNotFound, ContainerNotFound(container, name).Error())
		return nil, false
	}
	return p, true
}

// streamingRetryAfter is the Retry-After of a 429, the lifetime of a
// streaming URL in the runtime's cache (the kubelet's answer).
const streamingRetryAfter = "60"

// writeStreamingError answers an error of Streaming with its HTTP status.
func (h *streamHandlers) writeStreamingError(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	default:
		switch grpcstatus.Code(err) {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.ResourceExhausted:
			code = http.StatusTooManyRequests
			w.Header().Set("Retry-After", streamingRetryAfter)
		}
	}
	h.log.Debug("streaming request failed", "path", r.URL.Path, "status", code, "error", err)
	writeText(w, code, err.Error())
}

// proxy forwards the upgraded connection of r to the runtime's streaming
// server at u (the URL carries the session; the request's query is not
// forwarded). The client's credentials are not passed on.
func (h *streamHandlers) proxy(w http.ResponseWriter, r *http.Request, u *url.URL) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	r.Header.Del("Proxy-Authorization")
	handler := proxy.NewUpgradeAwareHandler(u, nil /* transport */, false /* wrapTransport */, true /* upgradeRequired */, streamResponder{log: h.log})
	handler.ServeHTTP(w, r)
}

// streamResponder answers an error of the proxy before the connection is
// upgraded: logged, and 500 with its text, as the kubelet.
type streamResponder struct {
	log hclog.Logger
}

// Error implements proxy.ErrorResponder.
func (s streamResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Warn("error while proxying a streaming request", "path", r.URL.Path, "error", err)
	writeText(w, http.StatusInternalServerError, err.Error())
}

// specTTY is whether the pod's spec gives the container a terminal.
func specTTY(p *v1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.TTY
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return c.TTY
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return c.TTY
		}
	}
	return false
}

// missingStreamParam is the error for a required query parameter that is
// absent or empty.
func missingStreamParam(name string) error {
	return fmt.Errorf("query parameter %q is required", name)
}
