package runtime

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/httpget"
	"github.com/wasmlet/wasmlet/host/internal/podenv"
)

// runHandler runs a container's postStart or preStop handler as the
// kubelet's handler runner does: exec in the container, an HTTP GET (to the
// pod's IP unless the handler names a host), or a sleep; it returns the
// handler's output and an error when it failed.
func (m *Manager) runHandler(ctx context.Context, pod *v1.Pod, c *v1.Container, id string, h *v1.LifecycleHandler, podIPs []string) (string, error) {
	switch {
	case h.Exec != nil:
		var timeout time.Duration
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		out, code, err := m.ExecSync(ctx, id, podenv.StaticCommand(h.Exec.Command, c.Env), timeout)
		if err != nil {
			return string(out), err
		}
		if code != 0 {
			return string(out), fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), code, out)
		}
		return string(out), nil
	case h.HTTPGet != nil:
		return m.httpHandler(ctx, pod, c, h.HTTPGet, podIPs)
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return "", nil
	case h.TCPSocket != nil:
		return "", fmt.Errorf("tcpSocket is not a valid lifecycle handler")
	}
	return "", fmt.Errorf("no handler set")
}

// httpHandler GETs the handler's URL; any answer below 400 is a success,
// as the kubelet's HTTP lifecycle handler takes it.
func (m *Manager) httpHandler(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIPs []string) (string, error) {
	host := g.Host
	if host == "" {
		if len(podIPs) == 0 {
			if st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
				podIPs = st.IPs
			}
		}
		if len(podIPs) == 0 {
			return "", fmt.Errorf("failed to find networking container, or the pod has no IP")
		}
		host = podIPs[0]
	}
	resp, err := httpget.Do(ctx, httpget.Request{Action: g, Container: c, PodIP: host, UserAgent: "kube-lifecycle/1.36", Timeout: 10 * time.Second, MaxBody: 10 << 10})
	if err != nil {
		return "", err
	}
	if resp.StatusCode >= http.StatusBadRequest {
		return string(resp.Body), fmt.Errorf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %s, message: %q", resp.URL.Path, c.Name, pod.Name, resp.Status, resp.Body)
	}
	return string(resp.Body), nil
}
