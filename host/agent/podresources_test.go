package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"

	"github.com/wasmlet/wasmlet/host/internal/podresources"
)

func TestAgent_Run_PodResources(t *testing.T) {
	h := newHarness(t)
	h.write(t, "web", "img:1")
	// A pod that runs once: when its container exits it is terminal.
	m := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: job\nspec:\n  hostNetwork: true\n  restartPolicy: Never\n  containers:\n  - name: once\n    image: img:1\n"
	if err := os.WriteFile(filepath.Join(h.manifests, "job.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	a, stop := h.start(t)
	defer stop()
	waitPods(t, a, 2, v1.PodRunning, 10*time.Second)

	conn, err := grpc.NewClient("unix://"+podresources.SocketPath(a.cfg.RootDir), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli, alpha := podresourcesv1.NewPodResourcesListerClient(conn), v1alpha1.NewPodResourcesListerClient(conn)
	list := func() string {
		t.Helper()
		resp, err := cli.List(context.Background(), &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, pr := range resp.PodResources {
			out = append(out, fmt.Sprintf("%s/%s:%d", pr.Namespace, pr.Name, len(pr.Containers)))
		}
		return fmt.Sprint(out)
	}
	if got, want := list(), "[default/job-n1:1 default/web-n1:1]"; got != want {
		t.Errorf("List = %s, want %s", got, want)
	}
	if resp, err := cli.Get(context.Background(), &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: "web-n1"}); err != nil ||
		len(resp.PodResources.Containers) != 1 || resp.PodResources.Containers[0].Name != "c" {
		t.Errorf("Get web-n1 = %v, %v", resp, err)
	}

	// The job's container exits: the pod fails and leaves List and Get,
	// but not v1alpha1's List, which shows every pod of the pod manager.
	h.fake.RuntimeService.Lock()
	for _, c := range h.fake.RuntimeService.Containers {
		if c.Labels["io.kubernetes.pod.name"] == "job-n1" {
			c.State, c.ExitCode, c.FinishedAt = 2, 1, time.Now().UnixNano() // CONTAINER_EXITED
		}
	}
	h.fake.RuntimeService.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for list() != "[default/web-n1:1]" {
		if time.Now().After(deadline) {
			t.Fatalf("List = %s after the job failed, want only web-n1", list())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := cli.Get(context.Background(), &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: "job-n1"}); err == nil {
		t.Error("Get of the failed job: no error")
	}
	resp, err := alpha.List(context.Background(), &v1alpha1.ListPodResourcesRequest{})
	if err != nil || len(resp.PodResources) != 2 {
		t.Errorf("v1alpha1 List = %v, %v; want both pods", resp, err)
	}
}
