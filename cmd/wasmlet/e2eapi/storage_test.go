//go:build e2e_apiserver

package e2eapi

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// evictionWait bounds the wait for an eviction: the volume walk is reused
// for the agent's --volume-stats-agg-period and the eviction manager looks
// every 10 s (the runtimes refresh a writable layer's usage every 10 s);
// minutes are a margin no loaded machine breaks.
const evictionWait = 4 * time.Minute

// waitEvicted waits for the pod to be Failed with reason Evicted and
// message msg, and for its Warning event Evicted with the same message.
func waitEvicted(t *testing.T, name, msg string) {
	t.Helper()
	got := waitPod(t, "default", name, evictionWait, "Failed/Evicted", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if got.Status.Reason != "Evicted" || got.Status.Message != msg {
		t.Errorf("pod %s: reason %q message %q, want Evicted and %q", name, got.Status.Reason, got.Status.Message, msg)
	}
	waitEvent(t, name, v1.EventTypeWarning, "Evicted", msg)
}

// waitEvent waits for an event of the pod with this type, reason and
// message.
func waitEvent(t *testing.T, pod, eventType, reason, msg string) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, "event "+reason+" of "+pod, func() (bool, string) {
		ctx, cancel := ctxT(10 * time.Second)
		defer cancel()
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Type == eventType && e.Reason == reason && e.Message == msg {
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, " | ")
	})
}

// A pod whose emptyDir (sizeLimit 1Mi) gets 4 MiB is evicted, with the
// kubelet's reason, message and event, while another pod on the node runs
// on untouched; the eviction is counted by signal.
func testEmptyDirEviction(t *testing.T, a *agent) {
	calm := newPod("calm", "sleep", "inf")
	createPod(t, calm)
	t.Cleanup(func() { deletePod(t, calm.Name) })
	waitPod(t, "default", calm.Name, 120*time.Second, "Running", harness.Running)

	hog := newPod("emptydir-hog", "fill", "/scratch/big", "4", ";", "sleep", "inf")
	limit := resource.MustParse("1Mi")
	hog.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	hog.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	before := a.metric(t, "wasmlet_evictions_total", `eviction_signal="emptydirfs.limit"`)
	createPod(t, hog)
	t.Cleanup(func() { deletePod(t, hog.Name) })
	waitEvicted(t, hog.Name, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `)
	if got := a.metric(t, "wasmlet_evictions_total", `eviction_signal="emptydirfs.limit"`); got != before+1 {
		t.Errorf("wasmlet_evictions_total{eviction_signal=\"emptydirfs.limit\"} %v, want %v", got, before+1)
	}
	c := waitPod(t, "default", calm.Name, 30*time.Second, "Running", harness.Running)
	if cs := c.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("the other pod after the eviction: %+v, want running, never restarted", cs)
	}
}

// A container whose rootfs gets 4 MiB over its ephemeral-storage limit of
// 1Mi is evicted with the container message (on the embedded runtime the
// rootfs is the container's scratch root). A second container with a
// larger limit keeps the pod's total under the sum of the limits, so the
// container's own limit is the one broken (the kubelet checks the pod's
// total first).
func testContainerStorageEviction(t *testing.T, a *agent) {
	p := newPod("rootfs-hog", "fill", "/big", "4", ";", "sleep", "inf")
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Mi")}
	side := p.Spec.Containers[0]
	side.Name, side.Args = "side", []string{"sleep", "inf"}
	side.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")},
		Limits:   v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("64Mi")},
	}
	p.Spec.Containers = append(p.Spec.Containers, side)
	before := a.metric(t, "wasmlet_evictions_total", `eviction_signal="ephemeralcontainerfs.limit"`)
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	waitEvicted(t, p.Name, `Container main exceeded its local ephemeral storage limit "1Mi". `)
	if got := a.metric(t, "wasmlet_evictions_total", `eviction_signal="ephemeralcontainerfs.limit"`); got != before+1 {
		t.Errorf("wasmlet_evictions_total{eviction_signal=\"ephemeralcontainerfs.limit\"} %v, want %v", got, before+1)
	}
}

// A pod with activeDeadlineSeconds 5 ends Failed, DeadlineExceeded, with
// the kubelet's message and a DeadlineExceeded event.
func testActiveDeadline(t *testing.T, _ *agent) {
	p := newPod("deadline", "sleep", "inf")
	p.Spec.ActiveDeadlineSeconds = ptr.To(int64(5))
	createPod(t, p)
	t.Cleanup(func() { deletePod(t, p.Name) })
	got := waitPod(t, "default", p.Name, 3*time.Minute, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	const msg = "Pod was active on the node longer than the specified deadline"
	if got.Status.Reason != "DeadlineExceeded" || got.Status.Message != msg {
		t.Errorf("reason %q message %q, want DeadlineExceeded and %q", got.Status.Reason, got.Status.Message, msg)
	}
	if got.Status.StartTime == nil {
		t.Error("no start time")
	}
	waitEvent(t, p.Name, v1.EventTypeNormal, "DeadlineExceeded", msg)
	// Its container is stopped.
	waitPod(t, "default", p.Name, 2*time.Minute, "container terminated", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Terminated != nil
	})
}
