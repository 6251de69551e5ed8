package cri

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

// fakeRuntime serves the CRI fake over a unix socket (unit tests only; the
// e2e suite runs against real runtimes).
func fakeRuntime(t *testing.T) (*fake.RemoteRuntime, *Client) {
	t.Helper()
	f := fake.NewFakeRemoteRuntime()
	endpoint := "unix://" + filepath.Join(t.TempDir(), "cri.sock")
	if err := f.Start(endpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return f, c
}

func TestClient_RunPod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hostNet bool
		wantNet runtimeapi.NamespaceMode
		wantHN  string
	}{
		{"host network", true, runtimeapi.NamespaceMode_NODE, ""},
		{"pod network", false, runtimeapi.NamespaceMode_POD, "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := fakeRuntime(t)
			ctx := context.Background()
			sb, ct, err := c.RunPod(ctx, Pod{Name: "p", Namespace: "default", UID: "u", Image: "img", Args: []string{"sleep", "inf"}, HostNetwork: tc.hostNet, LogDir: "/logs/p"})
			if err != nil {
				t.Fatal(err)
			}
			calls := strings.Join(f.RuntimeService.GetCalls(), " ")
			if !strings.Contains(calls, "RunPodSandbox CreateContainer StartContainer") {
				t.Errorf("calls %q, want RunPodSandbox, CreateContainer, StartContainer in order", calls)
			}
			st, err := c.Runtime.PodSandboxStatus(ctx, sb, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Status.GetLinux().GetNamespaces().GetOptions().GetNetwork(); got != tc.wantNet {
				t.Errorf("network namespace %v, want %v", got, tc.wantNet)
			}
			cs, err := c.Runtime.ContainerStatus(ctx, ct, false)
			if err != nil {
				t.Fatal(err)
			}
			if cs.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING || cs.Status.GetImage().GetImage() != "img" {
				t.Errorf("container %s", String(cs.Status))
			}
		})
	}
}

func TestClient_RemoveAll(t *testing.T) {
	_, c := fakeRuntime(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		if _, _, err := c.RunPod(ctx, Pod{Name: n, Namespace: "default", UID: n, Image: "img", HostNetwork: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RemoveAll(ctx, 1); err != nil {
		t.Fatal(err)
	}
	sbs, _ := c.Runtime.ListPodSandbox(ctx, nil)
	cts, _ := c.Runtime.ListContainers(ctx, nil)
	if len(sbs) != 0 || len(cts) != 0 {
		t.Errorf("left %d sandboxes and %d containers", len(sbs), len(cts))
	}
}
