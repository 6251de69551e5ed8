package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/httpget"
	"github.com/wasmlet/wasmlet/host/internal/podenv"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

type result int

const (
	resultSuccess result = iota
	resultWarning        // success, with something to say (an HTTP redirect elsewhere)
	resultFailure
	resultUnknown
)

type outcome struct {
	result result
	output string
}

// userAgent is what the kubelet's HTTP and gRPC probes send.
const userAgent = "kube-probe/1.36"

// maxBody is how much of an HTTP probe's answer is kept for its message.
const maxBody = 10 << 10

// run runs one probe of the container instance.
func (m *Manager) run(ctx context.Context, kind Kind, pod *v1.Pod, c *v1.Container, p *v1.Probe, containerID, podIP string) outcome {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Second
	}
	switch {
	case p.Exec != nil:
		return m.execProbe(ctx, c, p.Exec, containerID, timeout)
	case p.HTTPGet != nil:
		return httpProbe(ctx, c, p.HTTPGet, podIP, timeout)
	case p.TCPSocket != nil:
		return tcpProbe(ctx, c, p.TCPSocket, podIP, timeout)
	case p.GRPC != nil:
		return grpcProbe(ctx, p.GRPC, podIP, timeout)
	}
	return outcome{resultUnknown, fmt.Sprintf("%s probe of container %s has no handler", kind, c.Name)}
}

func (m *Manager) execProbe(ctx context.Context, c *v1.Container, e *v1.ExecAction, containerID string, timeout time.Duration) outcome {
	_, id, _ := strings.Cut(containerID, "://")
	cmd := podenv.StaticCommand(e.Command, c.Env)
	// No deadline of the prober's own: the runtime bounds the command by
	// timeout, and the CRI client the call by its request timeout plus
	// timeout, as the kubelet's. A busy runtime that starts the command
	// late (seconds under a burst of execs) must not fail the probe and
	// restart a healthy container, which a tighter deadline did.
	out, code, err := m.cfg.Runtime.ExecSync(ctx, id, cmd, timeout)
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded):
		return outcome{resultFailure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " "))}
	case err != nil:
		return outcome{resultUnknown, err.Error()}
	case code != 0:
		return outcome{resultFailure, string(out)}
	}
	return outcome{resultSuccess, string(out)}
}

func httpProbe(ctx context.Context, c *v1.Container, h *v1.HTTPGetAction, podIP string, timeout time.Duration) outcome {
	resp, err := httpget.Do(ctx, httpget.Request{Action: h, Container: c, PodIP: podIP, UserAgent: userAgent, Timeout: timeout, MaxBody: maxBody})
	if err != nil {
		return outcome{resultFailure, err.Error()}
	}
	if resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusBadRequest {
		if resp.Redirected() {
			return outcome{resultWarning, fmt.Sprintf("Probe terminated redirects, Response body: %s", resp.Body)}
		}
		return outcome{resultSuccess, string(resp.Body)}
	}
	return outcome{resultFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)}
}

func tcpProbe(ctx context.Context, c *v1.Container, t *v1.TCPSocketAction, podIP string, timeout time.Duration) outcome {
	host := t.Host
	if host == "" {
		host = podIP
	}
	n, err := podspec.ContainerPort(c, t.Port)
	if err != nil {
		return outcome{resultFailure, err.Error()}
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(n)))
	if err != nil {
		return outcome{resultFailure, err.Error()}
	}
	conn.Close()
	return outcome{resultSuccess, ""}
}

func grpcProbe(ctx context.Context, g *v1.GRPCAction, podIP string, timeout time.Duration) outcome {
	addr := net.JoinHostPort(podIP, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(userAgent))
	if err != nil {
		return outcome{resultFailure, err.Error()}
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	svc := ""
	if g.Service != nil {
		svc = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return outcome{resultFailure, fmt.Sprintf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %v", err)}
	case status.Code(err) == codes.DeadlineExceeded:
		return outcome{resultFailure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)}
	case err != nil:
		return outcome{resultFailure, fmt.Sprintf("error: health rpc probe failed: %v", err)}
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return outcome{resultFailure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus())}
	}
	return outcome{resultSuccess, ""}
}
