package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wasmlet/wasmlet/host/internal/admission"
)

// AdmitterName names the manager in admission results.
const AdmitterName = "DeviceManager"

// preStartTimeout bounds a PreStartContainer call (the API's
// KubeletPreStartContainerRPCTimeoutInSecs).
const preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second

// allocation is the devices of one resource given to one container and the
// plugin's answer for them.
type allocation struct {
	DeviceIDs []string
	Response  *pluginapi.ContainerAllocateResponse
}

// podAllocation is a pod's allocations by container name, then resource.
type podAllocation struct {
	Pod        string // namespace/name, for messages
	Containers map[string]map[string]*allocation
}

// allocations are the node's allocations by pod UID.
type allocations map[types.UID]*podAllocation

// Name names the manager in admission results.
func (m *Manager) Name() string { return AdmitterName }

// Admit allocates devices to the pod's containers that request a device
// plugin's resource; a failure rejects the pod with the kubelet's reason,
// UnexpectedAdmissionError.
func (m *Manager) Admit(ctx context.Context, a admission.Attributes) (admission.Result, error) {
	if err := m.Allocate(ctx, a.Pod); err != nil {
		return admission.Result{Reason: "UnexpectedAdmissionError", Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}, nil
	}
	return admission.Result{Admit: true}, nil
}

// Allocate gives each container of pod that requests a device plugin's
// resource (in its limits, as the kubelet reads them) that many healthy
// devices no other pod holds, chosen with the plugin's
// GetPreferredAllocation when it offers one, and keeps the plugin's
// Allocate answer. A container already given its devices keeps them. The
// devices of a regular init container are given again to the containers
// after it. The devices of pods no longer active count as free: a pod given
// one of them frees that pod's allocations (the kubelet frees them all
// before allocating; freeing only what is needed keeps the allocations of a
// pod that is not active yet — one later in the batch a restarted agent
// admits).
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod) error {
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	active := m.activeSet(pod.UID)
	changed := false
	defer func() {
		if changed {
			m.writeCheckpoint()
		}
	}()
	reusable := map[string]map[string]bool{} // resource → device IDs
	containers := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		containers = append(containers, &pod.Spec.InitContainers[i])
	}
	init := len(containers)
	for i := range pod.Spec.Containers {
		containers = append(containers, &pod.Spec.Containers[i])
	}
	for i, c := range containers {
		regularInit := i < init && (c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways)
		for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
			res := string(name)
			q := c.Resources.Limits[name]
			if q.Value() <= 0 || !m.isDeviceResource(res) {
				continue
			}
			if reusable[res] == nil {
				reusable[res] = map[string]bool{}
			}
			a, fresh, err := m.allocateContainer(ctx, pod, c.Name, res, int(q.Value()), reusable[res], active)
			if err != nil {
				return err
			}
			changed = changed || fresh
			for _, id := range a.DeviceIDs {
				if regularInit {
					reusable[res][id] = true
				} else {
					delete(reusable[res], id)
				}
			}
		}
	}
	return nil
}

// allocateContainer allocates n devices of res to one container, or
// returns those it has; fresh tells a new allocation. The devices of pods
// not in active (nil: every pod is) count as free.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, container, res string, n int, reusable map[string]bool, active map[types.UID]bool) (*allocation, bool, error) {
	m.mu.Lock()
	if a := m.allocations[pod.UID].get(container, res); a != nil {
		m.mu.Unlock()
		return a, false, nil
	}
	e := m.endpoints[res]
	if e == nil || !e.stopped.IsZero() {
		m.mu.Unlock()
		return nil, false, fmt.Errorf("pod %s container %s: resource %s: no device plugin serves it", podName(pod), container, res)
	}
	// inUse are held by active pods; stale by the others, given last.
	inUse, stale := map[string]bool{}, map[string]bool{}
	for uid, pa := range m.allocations {
		for _, byRes := range pa.Containers {
			a := byRes[res]
			if a == nil {
				continue
			}
			for _, id := range a.DeviceIDs {
				switch {
				case active != nil && !active[uid]:
					stale[id] = true
				case uid != pod.UID || !reusable[id]:
					inUse[id] = true
				}
			}
		}
	}
	var available []string
	for id := range m.healthy[res] {
		if !inUse[id] {
			available = append(available, id)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(available, func(a, b string) int {
		if stale[a] != stale[b] {
			if stale[a] {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	if len(available) < n {
		return nil, false, fmt.Errorf("pod %s container %s: plugin %s: requested number of devices unavailable for %s. Requested: %d, Available: %d", podName(pod), container, e.socket, res, n, len(available))
	}
	ids, err := m.choose(ctx, e, available, reusable, n)
	if err != nil {
		return nil, false, fmt.Errorf("pod %s container %s: plugin %s resource %s: %w", podName(pod), container, e.socket, res, err)
	}
	resp, err := e.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, false, fmt.Errorf("pod %s container %s: plugin %s resource %s: Allocate: %w", podName(pod), container, e.socket, res, err)
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, false, fmt.Errorf("pod %s container %s: plugin %s resource %s: Allocate answered for %d containers, asked for 1", podName(pod), container, e.socket, res, len(resp.ContainerResponses))
	}
	a := &allocation{DeviceIDs: ids, Response: resp.ContainerResponses[0]}
	m.mu.Lock()
	m.reclaim(res, ids, active)
	m.allocations.put(pod, container, res, a)
	m.mu.Unlock()
	m.log.Info("devices allocated", "pod", podName(pod), "container", container, "resource", res, "devices", ids)
	return a, true, nil
}

// choose picks n of available: the reusable ones first, then the plugin's
// preferred ones when it offers GetPreferredAllocation (and answers with n
// of the available), else the first in order.
func (m *Manager) choose(ctx context.Context, e *endpoint, available []string, reusable map[string]bool, n int) ([]string, error) {
	var must []string
	for _, id := range available {
		if reusable[id] && len(must) < n {
			must = append(must, id)
		}
	}
	if len(must) == n {
		return must, nil
	}
	if e.options.GetGetPreferredAllocationAvailable() {
		resp, err := e.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: must, AllocationSize: int32(n),
		}}})
		if err != nil {
			return nil, fmt.Errorf("GetPreferredAllocation: %w", err)
		}
		if rs := resp.GetContainerResponses(); len(rs) == 1 && len(rs[0].DeviceIDs) == n && subset(rs[0].DeviceIDs, available) {
			return rs[0].DeviceIDs, nil
		}
		m.log.Warn("preferred allocation ignored: not the size asked for or not of the available devices", "plugin", e.socket, "resource", e.resource)
	}
	ids := must
	for _, id := range available {
		if len(ids) == n {
			break
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func subset(ids, of []string) bool {
	for _, id := range ids {
		if !slices.Contains(of, id) {
			return false
		}
	}
	return true
}

// isDeviceResource tells whether a device plugin serves res, served it or
// holds allocations of it.
func (m *Manager) isDeviceResource(res string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.endpoints[res] != nil || m.healthy[res] != nil || m.removed[res] {
		return true
	}
	for _, pa := range m.allocations {
		for _, byRes := range pa.Containers {
			if byRes[res] != nil {
				return true
			}
		}
	}
	return false
}

// activeSet is the UIDs of the active pods and keep; nil without
// ActivePods.
func (m *Manager) activeSet(keep types.UID) map[types.UID]bool {
	if m.cfg.ActivePods == nil {
		return nil
	}
	active := map[types.UID]bool{keep: true}
	for _, p := range m.cfg.ActivePods() {
		active[p.UID] = true
	}
	return active
}

// reclaim frees the allocations of the pods not in active that hold one of
// ids of res; the caller holds mu.
func (m *Manager) reclaim(res string, ids []string, active map[types.UID]bool) {
	if active == nil {
		return
	}
	for uid, pa := range m.allocations {
		if active[uid] {
			continue
		}
		for _, byRes := range pa.Containers {
			if a := byRes[res]; a != nil && slices.ContainsFunc(a.DeviceIDs, func(id string) bool { return slices.Contains(ids, id) }) {
				m.log.Info("devices freed: their pod is no longer active", "pod", pa.Pod, "uid", uid, "resource", res)
				m.forgetPod(uid)
				break
			}
		}
	}
}

// RemovePod frees a pod's devices (its record is forgotten: it terminated
// and left the node).
func (m *Manager) RemovePod(uid types.UID) {
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	m.mu.Lock()
	freed := m.forgetPod(uid)
	m.mu.Unlock()
	if freed {
		m.writeCheckpoint()
	}
}

// ApplyDevices adds to a container's CRI config what the device plugins
// answered for its devices: environment variables (the container's own
// win), mounts (a path the config mounts already is left to it), device
// nodes, annotations and CDI devices; before, it calls PreStartContainer
// of the plugins that ask for it. A container whose devices were not
// allocated yet (admitted before its plugin registered) is allocated them
// now.
func (m *Manager) ApplyDevices(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	if m.missing(pod, c) {
		if err := m.Allocate(ctx, pod); err != nil {
			return err
		}
	}
	m.mu.Lock()
	byRes := map[string]*allocation{}
	if pa := m.allocations[pod.UID]; pa != nil {
		maps.Copy(byRes, pa.Containers[c.Name])
	}
	eps := map[string]*endpoint{}
	for res := range byRes {
		eps[res] = m.endpoints[res]
	}
	m.mu.Unlock()
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		a, e := byRes[res], eps[res]
		if e != nil && e.options.GetPreStartRequired() {
			pctx, cancel := context.WithTimeout(ctx, preStartTimeout)
			_, err := e.client.PreStartContainer(pctx, &pluginapi.PreStartContainerRequest{DevicesIds: a.DeviceIDs})
			cancel()
			if err != nil {
				return fmt.Errorf("pod %s container %s: plugin %s resource %s: PreStartContainer: %w", podName(pod), c.Name, e.socket, res, err)
			}
		}
		apply(cfg, a.Response)
	}
	return nil
}

// missing tells whether c asks for a device plugin's resource it was not
// given yet.
func (m *Manager) missing(pod *v1.Pod, c *v1.Container) bool {
	for name, q := range c.Resources.Limits {
		if q.Value() <= 0 || !m.isDeviceResource(string(name)) {
			continue
		}
		m.mu.Lock()
		a := m.allocations[pod.UID].get(c.Name, string(name))
		m.mu.Unlock()
		if a == nil {
			return true
		}
	}
	return false
}

// apply adds a plugin's answer to a CRI container config.
func apply(cfg *runtimeapi.ContainerConfig, r *pluginapi.ContainerAllocateResponse) {
	if r == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
		if !slices.ContainsFunc(cfg.Envs, func(e *runtimeapi.KeyValue) bool { return e.Key == k }) {
			cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(r.Envs[k])})
		}
	}
	for _, mt := range r.Mounts {
		if !slices.ContainsFunc(cfg.Mounts, func(x *runtimeapi.Mount) bool { return x.ContainerPath == mt.ContainerPath }) {
			cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
		}
	}
	for _, d := range r.Devices {
		cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
	}
	if len(r.Annotations) > 0 && cfg.Annotations == nil {
		cfg.Annotations = map[string]string{}
	}
	maps.Copy(cfg.Annotations, r.Annotations)
	for _, d := range r.CdiDevices {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
	}
}

// get returns a container's allocation of res; nil when none.
func (pa *podAllocation) get(container, res string) *allocation {
	if pa == nil {
		return nil
	}
	return pa.Containers[container][res]
}

// put records a container's allocation.
func (as allocations) put(pod *v1.Pod, container, res string, a *allocation) {
	pa := as[pod.UID]
	if pa == nil {
		pa = &podAllocation{Pod: pod.Namespace + "/" + pod.Name, Containers: map[string]map[string]*allocation{}}
		as[pod.UID] = pa
	}
	if pa.Containers[container] == nil {
		pa.Containers[container] = map[string]*allocation{}
	}
	pa.Containers[container][res] = a
}
