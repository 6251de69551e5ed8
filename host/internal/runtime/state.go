package runtime

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var managedSelector = map[string]string{LabelManaged: "true"}

// GetPods lists every pod wasmlet manages in the runtime (the PLEG relist):
// two CRI calls whatever the number of pods. A sandbox listing larger than
// the CRI message limit (sandboxes carry their pods' annotations, up to
// 256 KiB each) does not blind the relist: the sandboxes are then listed
// pod by pod, for the pods that have containers (see sandboxesByPod).
func (m *Manager) GetPods(ctx context.Context) ([]*container.Pod, error) {
	cs, err := m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: managedSelector})
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers: %w", err)
	}
	sbs, err := m.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector})
	if status.Code(err) == codes.ResourceExhausted {
		sbs, err = m.sandboxesByPod(ctx, cs)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: list sandboxes: %w", err)
	}
	byUID := podsOf(sbs, cs)
	pods := make([]*container.Pod, 0, len(byUID))
	for _, p := range byUID {
		pods = append(pods, p)
	}
	return pods, nil
}

// podsOf groups listed sandboxes and containers by their pod.
func podsOf(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) map[types.UID]*container.Pod {
	byUID := map[types.UID]*container.Pod{}
	get := func(labels map[string]string) *container.Pod {
		uid, name, ns := podRef(labels)
		p := byUID[uid]
		if p == nil {
			p = &container.Pod{UID: uid, Name: name, Namespace: ns}
			byUID[uid] = p
		}
		return p
	}
	for _, s := range sbs {
		st := container.StateExited
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			st = container.StateRunning
		}
		p := get(s.Labels)
		p.Objects = append(p.Objects, container.Object{ID: s.Id, Sandbox: true, State: st, CreatedAt: nanos(s.CreatedAt),
			Attempt: s.GetMetadata().GetAttempt(), RuntimeHandler: s.RuntimeHandler})
	}
	for _, c := range cs {
		p := get(c.Labels)
		p.Objects = append(p.Objects, container.Object{ID: c.Id, SandboxID: c.PodSandboxId, Name: c.Labels[LabelContainerName], State: toState(c.State), CreatedAt: nanos(c.CreatedAt)})
	}
	return byUID
}

// sandboxesByPod lists the sandboxes of each pod that has containers, one
// listing per pod, for when the listing of all sandboxes is over the
// message limit. A sandbox whose pod has no container yet is not seen by
// that relist; the pod's own sync reads it (GetPodStatus lists per pod).
func (m *Manager) sandboxesByPod(ctx context.Context, cs []*runtimeapi.Container) ([]*runtimeapi.PodSandbox, error) {
	uids := map[string]bool{}
	for _, c := range cs {
		if uid := c.Labels[LabelPodUID]; uid != "" {
			uids[uid] = true
		}
	}
	var out []*runtimeapi.PodSandbox
	for uid := range uids {
		sbs, err := m.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelManaged: "true", LabelPodUID: uid}})
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", uid, err)
		}
		out = append(out, sbs...)
	}
	return out, nil
}

func toState(s runtimeapi.ContainerState) container.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return container.StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return container.StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return container.StateExited
	}
	return container.StateUnknown
}

func nanos(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t)
}

// GetPodStatus reads one pod's sandboxes and containers from the runtime:
// it lists them, then reads their statuses (PodStatus). A pod the runtime
// does not know has an empty status, not an error.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*container.PodStatus, error) {
	ts := time.Now()
	sel := map[string]string{LabelPodUID: string(uid)}
	sbs, err := m.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("runtime: list sandboxes of pod %s/%s: %w", namespace, name, err)
	}
	cs, err := m.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers of pod %s/%s: %w", namespace, name, err)
	}
	pod := podsOf(sbs, cs)[uid]
	if pod == nil {
		pod = &container.Pod{}
	}
	pod.UID, pod.Name, pod.Namespace = uid, name, namespace
	return m.PodStatus(ctx, pod, ts)
}

// PodStatus reads the statuses of a listed pod's sandboxes and containers
// without listing again, as the kubelet reads the pods its relist found:
// the newest sandbox's and every ready one's status (IPs, network mode),
// and every container's. A container or sandbox removed since the listing
// is left out. The status is dated listedAt, when the listing began: it
// shows nothing newer than the listing.
func (m *Manager) PodStatus(ctx context.Context, pod *container.Pod, listedAt time.Time) (*container.PodStatus, error) {
	ps := &container.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, Timestamp: listedAt}
	var sbs, cs []container.Object
	for _, o := range pod.Objects {
		if o.Sandbox {
			sbs = append(sbs, o)
		} else {
			cs = append(cs, o)
		}
	}
	sort.SliceStable(sbs, func(i, j int) bool { return sbs[i].CreatedAt.After(sbs[j].CreatedAt) })
	for i, s := range sbs {
		ss := &container.SandboxStatus{ID: s.ID, Attempt: s.Attempt, Ready: s.State == container.StateRunning, CreatedAt: s.CreatedAt, RuntimeHandler: s.RuntimeHandler}
		if i == 0 || ss.Ready {
			resp, err := m.rs.PodSandboxStatus(ctx, s.ID, false)
			if status.Code(err) == codes.NotFound {
				continue // removed since the listing
			}
			if err != nil {
				return nil, fmt.Errorf("runtime: status of sandbox %s of pod %s/%s: %w", s.ID, pod.Namespace, pod.Name, err)
			}
			st := resp.GetStatus()
			ss.HostNetwork = st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
			ss.IPs = sandboxIPs(st)
			if ss.Ready && ps.IPs == nil {
				ps.IPs = ss.IPs
			}
		}
		ps.Sandboxes = append(ps.Sandboxes, ss)
	}
	for _, c := range cs {
		resp, err := m.rs.ContainerStatus(ctx, c.ID, false)
		if err != nil {
			// Removed between the list and the status: skip it.
			m.log.Debug("container status", "pod", pod.Namespace+"/"+pod.Name, "container", c.ID, "error", err)
			continue
		}
		ps.Containers = append(ps.Containers, m.containerStatus(resp.GetStatus(), c.SandboxID))
	}
	sort.SliceStable(ps.Containers, func(i, j int) bool { return ps.Containers[i].CreatedAt.After(ps.Containers[j].CreatedAt) })
	return ps, nil
}

func (m *Manager) containerStatus(s *runtimeapi.ContainerStatus, sandboxID string) *container.ContainerStatus {
	cs := &container.ContainerStatus{
		ID:            s.Id,
		SandboxID:     sandboxID,
		Name:          s.GetLabels()[LabelContainerName],
		State:         toState(s.State),
		CreatedAt:     nanos(s.CreatedAt),
		StartedAt:     nanos(s.StartedAt),
		FinishedAt:    nanos(s.FinishedAt),
		ExitCode:      s.ExitCode,
		Reason:        s.Reason,
		Message:       s.Message,
		Image:         s.GetImage().GetImage(),
		ImageRef:      s.ImageRef,
		Hash:          s.GetAnnotations()[AnnotationContainerHash],
		RestartCount:  restartCountOf(s.GetAnnotations()),
		KilledByProbe: m.killedByProbe(s.Id),
	}
	if g, err := strconv.ParseInt(s.GetAnnotations()[AnnotationGracePeriod], 10, 64); err == nil {
		cs.GracePeriod = &g
	}
	if cs.Name == "" {
		cs.Name = s.GetMetadata().GetName()
	}
	if cs.State == container.StateExited && cs.Message == "" {
		cs.Message = terminationMessage(s)
	}
	return cs
}

// terminationMessage reads the container's termination message file (at
// most 4 KiB, as the kubelet), or the tail of its log under
// FallbackToLogsOnError when it failed and wrote nothing.
func terminationMessage(s *runtimeapi.ContainerStatus) string {
	path := s.GetAnnotations()[AnnotationTerminationMessagePath]
	if path != "" {
		for _, mt := range s.Mounts {
			if mt.ContainerPath != path {
				continue
			}
			if b, err := readHead(mt.HostPath, 4096); err == nil && len(b) > 0 {
				return string(b)
			}
		}
	}
	if s.GetAnnotations()[AnnotationTerminationPolicy] == string(v1.TerminationMessageFallbackToLogsOnError) && s.ExitCode != 0 && s.LogPath != "" {
		return logTail(s.LogPath, 80, 2048)
	}
	return ""
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.Read(b)
	if k > 0 {
		return b[:k], nil
	}
	return nil, err
}

// sandboxIPs are a sandbox's primary IP then its additional ones; nil
// when it has none (host network).
func sandboxIPs(st *runtimeapi.PodSandboxStatus) []string {
	ip := st.GetNetwork().GetIp()
	if ip == "" {
		return nil
	}
	ips := []string{ip}
	for _, a := range st.GetNetwork().GetAdditionalIps() {
		ips = append(ips, a.Ip)
	}
	return ips
}
