package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/allocation"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/qos"
)

// Actuation records the resources applied to each container
// (allocation.Manager): SyncPod compares them with the pod's allocation to
// find the containers to resize.
type Actuation interface {
	// Actuated are the resources last applied to the container.
	Actuated(uid types.UID, name string) (v1.ResourceRequirements, bool)
	// SetActuated records the resources just applied to the container.
	SetActuated(uid types.UID, name string, r v1.ResourceRequirements) error
}

// resizeOrder is the order in which resources are resized, the kubelet's:
// memory, then cpu.
var resizeOrder = []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU}

// resizeTarget is a running container whose allocation differs from what
// it runs with, resized in place.
type resizeTarget struct {
	c        *v1.Container
	id       string
	actuated v1.ResourceRequirements
}

// computeResize finds the running app containers and sidecars whose allocation (pod is
// at its allocation) differs from their actuated resources: those whose
// resizePolicy asks a restart for a changed resource are added to a's
// containers to kill and start (the new instance starts with its
// allocation), the others are returned to be resized in place. A running
// container with no actuated record (started before records were kept)
// gets its allocation recorded.
func (m *Manager) computeResize(pod *v1.Pod, st *container.PodStatus, a *podActions) []resizeTarget {
	if m.cfg.Actuation == nil || a.KillPod || a.CreateSandbox {
		return nil
	}
	var out []resizeTarget
	type candidate struct {
		c     *v1.Container
		index int // in pod.Spec.Containers; -1 for a sidecar
	}
	var cands []candidate
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; container.IsSidecar(c) {
			cands = append(cands, candidate{c, -1})
		}
	}
	for i := range pod.Spec.Containers {
		cands = append(cands, candidate{&pod.Spec.Containers[i], i})
	}
	for _, cand := range cands {
		c := cand.c
		s := st.FindContainer(c.Name)
		if s == nil || s.State != container.StateRunning {
			continue
		}
		if _, killed := a.ContainersToKill[s.ID]; killed {
			continue
		}
		act, ok := m.cfg.Actuation.Actuated(pod.UID, c.Name)
		if !ok {
			m.cfg.Actuation.SetActuated(pod.UID, c.Name, c.Resources)
			continue
		}
		restart, changed := false, false
		for _, r := range resizeOrder {
			if allocation.ResourceChanged(act, c.Resources, r) {
				changed = true
				restart = restart || allocation.Policy(c, r) == v1.RestartContainer
			}
		}
		switch {
		case !changed:
		case restart:
			a.ContainersToKill[s.ID] = killInfo{name: c.Name, container: c, message: "Container " + c.Name + " resize requires restart"}
			if cand.index < 0 {
				a.SidecarsToRestart = append(a.SidecarsToRestart, c)
			} else {
				a.ContainersToStart = append(a.ContainersToStart, cand.index)
			}
		default:
			out = append(out, resizeTarget{c: c, id: s.ID, actuated: act})
		}
	}
	return out
}

// resizePod applies the allocation of pod to the targets in place, as the
// kubelet's doPodResizeAction: memory then cpu; for each, the pod cgroup
// grows before the containers and shrinks after them, and the containers
// whose resource decreases are updated before those whose resource
// increases. A memory limit is never lowered below what the pod or the
// container uses. Each container update records what it applied, so a
// failure part way leaves the record true and the next sync resumes.
func (m *Manager) resizePod(ctx context.Context, pod *v1.Pod, targets []resizeTarget) error {
	// stage is the pod as applied so far: its containers at their actuated
	// resources, with each resource resized so far at its allocation.
	stage := pod.DeepCopy()
	byName := containersByName(stage)
	for _, t := range targets {
		byName[t.c.Name].Resources = *t.actuated.DeepCopy()
	}
	for _, r := range resizeOrder {
		var changed []resizeTarget
		for _, t := range targets {
			if allocation.ResourceChanged(byName[t.c.Name].Resources, t.c.Resources, r) {
				changed = append(changed, t)
			}
		}
		if len(changed) == 0 {
			continue
		}
		before := qos.ForPodCgroup(stage)
		next := stage.DeepCopy()
		for _, t := range changed {
			setResource(&containersByName(next)[t.c.Name].Resources, t.c.Resources, r)
		}
		after := qos.ForPodCgroup(next)
		grows := podCgroupGrows(before, after, r)
		if m.cfg.Cgroups != nil && grows {
			if err := m.cfg.Cgroups.Resize(next, r); err != nil {
				return fmt.Errorf("pod cgroup %s: %w", r, err)
			}
		}
		if m.cfg.Cgroups != nil && !grows && r == v1.ResourceMemory && after.MemoryLimit != nil {
			if used, err := m.cfg.Cgroups.MemoryUsage(stage); err == nil && *after.MemoryLimit < used {
				return fmt.Errorf("pod memory limit %d would be below the pod's memory usage %d", *after.MemoryLimit, used)
			}
		}
		// Decreases first, so the increases find room.
		sort.SliceStable(changed, func(i, j int) bool {
			return decreases(byName[changed[i].c.Name].Resources, changed[i].c.Resources, r) &&
				!decreases(byName[changed[j].c.Name].Resources, changed[j].c.Resources, r)
		})
		for _, t := range changed {
			cur := byName[t.c.Name]
			want := cur.Resources.DeepCopy()
			setResource(want, t.c.Resources, r)
			if err := m.updateContainer(ctx, stage, t, cur.Resources, *want, r); err != nil {
				return err
			}
			cur.Resources = *want
		}
		if m.cfg.Cgroups != nil && !grows {
			if err := m.cfg.Cgroups.Resize(next, r); err != nil {
				return fmt.Errorf("pod cgroup %s: %w", r, err)
			}
		}
		stage = next
		byName = containersByName(stage)
	}
	return nil
}

// containersByName are the pod's app containers and init containers by
// name, pointing into pod.
func containersByName(pod *v1.Pod) map[string]*v1.Container {
	out := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		out[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	for i := range pod.Spec.Containers {
		out[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	return out
}

// updateContainer sends the container its resources with r changed from
// cur to want (its memory limit not lowered below its usage), after the
// hooks' PreUpdate point, and records them as actuated.
func (m *Manager) updateContainer(ctx context.Context, pod *v1.Pod, t resizeTarget, cur, want v1.ResourceRequirements, r v1.ResourceName) error {
	if r == v1.ResourceMemory {
		if lim, ok := want.Limits[v1.ResourceMemory]; ok && lim.Cmp(cur.Limits[v1.ResourceMemory]) < 0 {
			if used, err := m.memoryUsage(ctx, t.id); err == nil && lim.Value() < used {
				return fmt.Errorf("container %s: memory limit %d would be below its memory usage %d", t.c.Name, lim.Value(), used)
			}
		}
	}
	c := *t.c
	c.Resources = want
	linux := m.resources(pod, &c)
	if err := m.PreUpdate(ctx, pod, &c, linux); err != nil {
		return fmt.Errorf("container %s: PreUpdate hook: %w", c.Name, err)
	}
	if err := m.rs.UpdateContainerResources(ctx, t.id, &runtimeapi.ContainerResources{Linux: linux}); err != nil {
		return fmt.Errorf("container %s: update %s: %w", c.Name, r, err)
	}
	return m.cfg.Actuation.SetActuated(pod.UID, c.Name, want)
}

// memoryUsage is the container's memory usage from the runtime's stats.
func (m *Manager) memoryUsage(ctx context.Context, id string) (int64, error) {
	s, err := m.rs.ContainerStats(ctx, id)
	if err != nil {
		return 0, err
	}
	if u := s.GetMemory().GetUsageBytes(); u != nil {
		return int64(u.Value), nil
	}
	if w := s.GetMemory().GetWorkingSetBytes(); w != nil {
		return int64(w.Value), nil
	}
	return 0, errors.New("no memory usage in the container's stats")
}

// setResource sets r's request and limit in dst to src's (removing those
// src has not).
func setResource(dst *v1.ResourceRequirements, src v1.ResourceRequirements, r v1.ResourceName) {
	set := func(dst *v1.ResourceList, src v1.ResourceList) {
		q, ok := src[r]
		if !ok {
			delete(*dst, r)
			return
		}
		if *dst == nil {
			*dst = v1.ResourceList{}
		}
		(*dst)[r] = q.DeepCopy()
	}
	set(&dst.Requests, src.Requests)
	set(&dst.Limits, src.Limits)
}

// decreases reports whether r's limit (or, without limits, its request)
// goes down from cur to want; no limit is unlimited.
func decreases(cur, want v1.ResourceRequirements, r v1.ResourceName) bool {
	cl, cok := cur.Limits[r]
	wl, wok := want.Limits[r]
	switch {
	case wok && !cok:
		return true
	case cok && !wok:
		return false
	case cok && wok && cl.Cmp(wl) != 0:
		return wl.Cmp(cl) < 0
	}
	wr, cr := want.Requests[r], cur.Requests[r]
	return wr.Cmp(cr) < 0
}

// podCgroupGrows reports whether the pod cgroup's r does not shrink from
// before to after (it is then written before the containers).
func podCgroupGrows(before, after qos.PodCgroup, r v1.ResourceName) bool {
	limitGrows := func(b, a *int64) bool {
		switch {
		case a == nil || *a <= 0:
			return true // unlimited
		case b == nil || *b <= 0:
			return false
		}
		return *a >= *b
	}
	if r == v1.ResourceMemory {
		return limitGrows(before.MemoryLimit, after.MemoryLimit)
	}
	if after.CPUShares < before.CPUShares {
		return false
	}
	return limitGrows(before.CPUQuota, after.CPUQuota)
}
