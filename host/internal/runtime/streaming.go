package runtime

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The streaming calls, the runtime side of `kubectl exec`, `attach` and
// `port-forward`: like the kubelet, the manager asks the CRI runtime for a
// streaming URL (served by the runtime's own streaming server, such as
// containerd's) and the kubelet API proxies the client's upgraded
// connection to it. Errors from the runtime keep their gRPC status
// (NotFound, ResourceExhausted) so that the kubelet API can answer them
// with the matching HTTP status.

// ExecURL is the runtime's streaming URL for running cmd in the newest
// running instance of the pod's container with the given streams. The
// runtime refuses tty together with stderr (the kubelet API drops stderr
// when a tty is asked for, as the kubelet does).
func (m *Manager) ExecURL(ctx context.Context, pod *v1.Pod, name string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	c, err := m.findRunningContainer(ctx, pod, name)
	if err != nil {
		return nil, err
	}
	resp, err := m.rs.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: c.ID,
		Cmd:         cmd,
		Tty:         tty,
		Stdin:       stdin,
		Stdout:      stdout,
		Stderr:      stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: exec in container %q of pod %s/%s: %w", name, pod.Namespace, pod.Name, err)
	}
	return parseStreamingURL(resp.GetUrl())
}

// AttachURL is the runtime's streaming URL for attaching to the newest
// running instance of the pod's container. tty must be the container
// spec's TTY (a process's terminal cannot change once it runs).
func (m *Manager) AttachURL(ctx context.Context, pod *v1.Pod, name string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	c, err := m.findRunningContainer(ctx, pod, name)
	if err != nil {
		return nil, err
	}
	resp, err := m.rs.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: c.ID,
		Tty:         tty,
		Stdin:       stdin,
		Stdout:      stdout,
		Stderr:      stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: attach to container %q of pod %s/%s: %w", name, pod.Namespace, pod.Name, err)
	}
	return parseStreamingURL(resp.GetUrl())
}

// PortForwardURL is the runtime's streaming URL for forwarding ports of the
// pod's newest ready sandbox. ports may be empty: over SPDY each stream
// names its port in a header.
func (m *Manager) PortForwardURL(ctx context.Context, pod *v1.Pod, ports []int32) (*url.URL, error) {
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return nil, err
	}
	sandboxID := ""
	for _, sb := range st.Sandboxes { // newest first
		if sb.Ready {
			sandboxID = sb.ID
			break
		}
	}
	if sandboxID == "" {
		return nil, fmt.Errorf("pod %q has no ready sandbox", pod.Name)
	}
	resp, err := m.rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		return nil, fmt.Errorf("runtime: port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return parseStreamingURL(resp.GetUrl())
}

// RunInContainer runs cmd in the newest running instance of the pod's
// container (CRI ExecSync) and returns its stdout followed by its stderr,
// as the kubelet's RunInContainer (the two are not interleaved). A
// non-zero exit is an error, a k8s.io/utils/exec.CodeExitError carrying
// the exit code ("command '...' exited with N: ..."), returned together
// with the output. timeout 0 means none.
func (m *Manager) RunInContainer(ctx context.Context, pod *v1.Pod, name string, cmd []string, timeout time.Duration) ([]byte, error) {
	c, err := m.findRunningContainer(ctx, pod, name)
	if err != nil {
		return nil, err
	}
	stdout, stderr, err := m.rs.ExecSync(ctx, c.ID, cmd, timeout)
	out := make([]byte, 0, len(stdout)+len(stderr))
	out = append(append(out, stdout...), stderr...)
	return out, err
}

// findRunningContainer is the newest running instance of the pod's
// container, found by pod UID and container name.
func (m *Manager) findRunningContainer(ctx context.Context, pod *v1.Pod, name string) (*container.ContainerStatus, error) {
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return nil, err
	}
	for _, c := range st.Containers { // newest first
		if c.Name == name && c.State == container.StateRunning {
			return c, nil
		}
	}
	return nil, fmt.Errorf("container %q in pod %q is not running", name, pod.Name)
}

// parseStreamingURL parses the URL a runtime answered; it must be
// absolute, since the kubelet API dials it.
func parseStreamingURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("runtime: streaming URL %q: %w", raw, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("runtime: streaming URL %q is not absolute", raw)
	}
	return u, nil
}
