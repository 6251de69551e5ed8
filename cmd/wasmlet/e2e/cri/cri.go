// Package cri is the bare CRI client of wasmlet's end-to-end tests: it talks
// to a runtime (containerd or wasmlet's embedded runtime) directly, without
// the agent, to check what the agent left there, to time the sequential
// floor the agent is compared with, and to clean up after a run
// (hack/containerd/cri is its command-line front end).
package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// Client is a connection to one CRI runtime and image service.
type Client struct {
	// Runtime is the CRI RuntimeService.
	Runtime internalapi.RuntimeService
	// Image is the CRI ImageService.
	Image internalapi.ImageManagerService
	// Endpoint is the address connected to, e.g. unix:///tmp/x/c.sock.
	Endpoint string
}

// callTimeout bounds every CRI call made through a Client.
const callTimeout = 2 * time.Minute

// Connect dials endpoint for both services, retrying every 100 ms until
// the runtime answers Version or ctx ends (a runtime that is starting has no
// socket yet). It does not wait for the runtime to be ready; see WaitReady.
func Connect(ctx context.Context, endpoint string) (*Client, error) {
	for {
		c, err := connect(ctx, endpoint)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func connect(ctx context.Context, endpoint string) (*Client, error) {
	rs, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).WithConnectionTimeout(callTimeout).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime service %s: %w", endpoint, err)
	}
	is, err := remote.NewRemoteImageService(ctx, endpoint, callTimeout, nil, false)
	if err != nil {
		rs.Close(ctx)
		return nil, fmt.Errorf("image service %s: %w", endpoint, err)
	}
	return &Client{Runtime: rs, Image: is, Endpoint: endpoint}, nil
}

// Close closes the runtime connection.
func (c *Client) Close() error { return c.Runtime.Close(context.Background()) }

// WaitReady polls Status every 100 ms until the runtime answers and
// reports RuntimeReady, or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	var last error
	for {
		st, err := c.Runtime.Status(ctx, false)
		if err == nil {
			last = fmt.Errorf("runtime %s not ready: %v", c.Endpoint, st.GetStatus().GetConditions())
			for _, cond := range st.GetStatus().GetConditions() {
				if cond.Type == runtimeapi.RuntimeReady && cond.Status {
					return nil
				}
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Pod is a one-container pod as the bare client starts it.
type Pod struct {
	// Name, Namespace and UID fill the sandbox metadata.
	Name, Namespace, UID string
	// Image is the container's image reference, already present.
	Image string
	// Command and Args are the container's entrypoint and arguments.
	Command, Args []string
	// HostNetwork puts the sandbox in the node's network namespace.
	HostNetwork bool
	// LogDir is the sandbox log directory; the container logs to
	// <LogDir>/<Name>/0.log. Empty means no log file.
	LogDir string
	// Labels are set on both sandbox and container.
	Labels map[string]string
}

// RunPod creates and starts p's sandbox and container, one after another,
// as the kubelet would for a new pod, and returns their IDs.
func (c *Client) RunPod(ctx context.Context, p Pod) (sandboxID, containerID string, err error) {
	ns := runtimeapi.NamespaceMode_POD
	if p.HostNetwork {
		ns = runtimeapi.NamespaceMode_NODE
	}
	sc := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		LogDirectory: p.LogDir,
		Labels:       p.Labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: ns, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		}},
	}
	if !p.HostNetwork {
		sc.Hostname = p.Name
	}
	sandboxID, err = c.Runtime.RunPodSandbox(ctx, sc, "")
	if err != nil {
		return "", "", fmt.Errorf("pod %s/%s: RunPodSandbox: %w", p.Namespace, p.Name, err)
	}
	cc := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: p.Name},
		Image:    &runtimeapi.ImageSpec{Image: p.Image},
		Command:  p.Command,
		Args:     p.Args,
		Labels:   p.Labels,
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
	if p.LogDir != "" {
		cc.LogPath = p.Name + "/0.log"
	}
	containerID, err = c.Runtime.CreateContainer(ctx, sandboxID, cc, sc)
	if err != nil {
		return sandboxID, "", fmt.Errorf("pod %s/%s: CreateContainer: %w", p.Namespace, p.Name, err)
	}
	if err := c.Runtime.StartContainer(ctx, containerID); err != nil {
		return sandboxID, containerID, fmt.Errorf("pod %s/%s: StartContainer: %w", p.Namespace, p.Name, err)
	}
	return sandboxID, containerID, nil
}

// RemoveAll stops and removes every container and sandbox the runtime
// knows, the way a test run cleans up after itself. Containers are stopped
// with grace seconds before being killed.
func (c *Client) RemoveAll(ctx context.Context, grace int64) error {
	var errs []error
	ctrs, err := c.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("ListContainers: %w", err)
	}
	for _, ct := range ctrs {
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			if err := c.Runtime.StopContainer(ctx, ct.Id, grace); err != nil {
				errs = append(errs, fmt.Errorf("StopContainer %s: %w", ct.Id, err))
			}
		}
		if err := c.Runtime.RemoveContainer(ctx, ct.Id); err != nil {
			errs = append(errs, fmt.Errorf("RemoveContainer %s: %w", ct.Id, err))
		}
	}
	sbs, err := c.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("ListPodSandbox: %w", err))...)
	}
	for _, sb := range sbs {
		if err := c.Runtime.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("StopPodSandbox %s: %w", sb.Id, err))
		}
		if err := c.Runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("RemovePodSandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// Dump writes every sandbox and container with state, attempt and the
// io.kubernetes labels, for a failing test's diagnostics.
func (c *Client) Dump(ctx context.Context, w io.Writer) {
	sbs, err := c.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		fmt.Fprintf(w, "ListPodSandbox: %v\n", err)
	}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].CreatedAt < sbs[j].CreatedAt })
	for _, sb := range sbs {
		m := sb.GetMetadata()
		fmt.Fprintf(w, "sandbox %.13s %s/%s uid=%s attempt=%d %s\n", sb.Id, m.GetNamespace(), m.GetName(), m.GetUid(), m.GetAttempt(), sb.State)
	}
	ctrs, err := c.Runtime.ListContainers(ctx, nil)
	if err != nil {
		fmt.Fprintf(w, "ListContainers: %v\n", err)
	}
	sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].CreatedAt < ctrs[j].CreatedAt })
	for _, ct := range ctrs {
		fmt.Fprintf(w, "container %.13s sandbox=%.13s %s attempt=%d %s pod=%s image=%s\n", ct.Id, ct.PodSandboxId,
			ct.GetMetadata().GetName(), ct.GetMetadata().GetAttempt(), ct.State,
			ct.Labels["io.kubernetes.pod.name"], ct.GetImage().GetImage())
	}
}

// Images returns the references of every image the runtime holds, sorted.
func (c *Client) Images(ctx context.Context) ([]string, error) {
	imgs, err := c.Image.ListImages(ctx, nil)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, img := range imgs {
		refs = append(refs, img.RepoTags...)
	}
	sort.Strings(refs)
	return refs, nil
}

// String is a one-line summary of a container status for messages.
func String(s *runtimeapi.ContainerStatus) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %.13s %s attempt=%d", s.GetMetadata().GetName(), s.Id, s.State, s.GetMetadata().GetAttempt())
	if s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		fmt.Fprintf(&b, " exit=%d reason=%s", s.ExitCode, s.Reason)
	}
	return b.String()
}
