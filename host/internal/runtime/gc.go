package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/volumes"
)

// GarbageCollect removes what the runtime and the disk hold for nothing,
// as the kubelet's container GC and orphan cleanup: for pods keep says no
// to, every dead container and sandbox (sandboxes are stopped first) and
// the pod and log directories once the runtime holds nothing of the pod;
// for kept pods, exited containers beyond the newest per name and dead
// sandboxes other than the newest that hold no container. Running
// containers are never touched: killing is the pod workers' job. pods is
// the runtime's pods as GetPods just listed them (the caller has the list
// already: housekeeping looks for orphans in it first).
func (m *Manager) GarbageCollect(ctx context.Context, pods []*container.Pod, keep func(types.UID) bool) error {
	var errs []error
	inRuntime := map[types.UID]bool{}
	for _, p := range pods {
		kept := keep(p.UID)
		objs := append([]container.Object(nil), p.Objects...)
		sort.Slice(objs, func(i, j int) bool { return objs[i].CreatedAt.After(objs[j].CreatedAt) })
		live := false
		seenDead := map[string]bool{}
		for _, o := range objs {
			if o.Sandbox || o.State == container.StateRunning {
				live = live || o.State == container.StateRunning
				continue
			}
			if kept && o.State != container.StateExited {
				// Created, not yet started (or unknown): not dead. A
				// restarted container is created before it starts; were it
				// counted as the dead instance to keep, the exited one the
				// last termination state comes from would be removed.
				continue
			}
			if kept && !seenDead[o.Name] {
				seenDead[o.Name] = true
				continue
			}
			if err := m.rs.RemoveContainer(ctx, o.ID); err != nil {
				errs = append(errs, fmt.Errorf("remove container %s of pod %s/%s: %w", o.ID, p.Namespace, p.Name, err))
				continue
			}
			m.unlinkLog(o.ID)
		}
		first := true
		for _, o := range objs {
			if !o.Sandbox {
				continue
			}
			newest := first
			first = false
			if o.State == container.StateRunning {
				continue
			}
			if kept && (newest || m.sandboxHasContainers(p, o.ID)) {
				continue
			}
			if err := m.rs.StopPodSandbox(ctx, o.ID); err != nil {
				errs = append(errs, fmt.Errorf("stop sandbox %s of pod %s/%s: %w", o.ID, p.Namespace, p.Name, err))
				continue
			}
			if err := m.rs.RemovePodSandbox(ctx, o.ID); err != nil {
				errs = append(errs, fmt.Errorf("remove sandbox %s of pod %s/%s: %w", o.ID, p.Namespace, p.Name, err))
			}
		}
		if live || kept {
			inRuntime[p.UID] = true
		}
	}
	errs = append(errs, m.removeOrphanDirs(keep, inRuntime))
	m.removeDeadLogSymlinks()
	m.removeOrphanCgroups(pods, keep)
	return errors.Join(errs...)
}

// removeOrphanCgroups removes the cgroups of pods neither kept nor in the
// runtime at all. One still in use (a container's cgroup not yet
// released) stays until a later cleanup.
func (m *Manager) removeOrphanCgroups(pods []*container.Pod, keep func(types.UID) bool) {
	if m.cfg.Cgroups == nil {
		return
	}
	present := map[types.UID]bool{}
	for _, p := range pods {
		present[p.UID] = true
	}
	for _, uid := range m.cfg.Cgroups.Pods() {
		if keep(uid) || present[uid] {
			continue
		}
		if err := m.cfg.Cgroups.Remove(uid); err != nil {
			m.log.Debug("pod cgroup not removed yet", "uid", uid, "error", err)
		}
	}
}

// sandboxHasContainers is true while a dead sandbox still holds container
// instances the pod's restart count and last state come from.
func (m *Manager) sandboxHasContainers(p *container.Pod, sandboxID string) bool {
	for _, o := range p.Objects {
		if !o.Sandbox && o.SandboxID == sandboxID {
			return true
		}
	}
	return false
}

// removeOrphanDirs removes <RootDir>/pods/<uid> of pods neither kept nor
// in the runtime, with their <PodLogsDir>/<ns>_<name>_<uid>: only pods
// wasmlet made a directory for, so a log directory shared with another
// agent is safe.
func (m *Manager) removeOrphanDirs(keep func(types.UID) bool, inRuntime map[types.UID]bool) error {
	ents, err := os.ReadDir(filepath.Join(m.cfg.RootDir, "pods"))
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range ents {
		uid := types.UID(e.Name())
		if !e.IsDir() || keep(uid) || inRuntime[uid] {
			continue
		}
		// A pod's tmpfs volumes are unmounted before its directory goes.
		if err := volumes.UnmountUnder(filepath.Join(m.cfg.RootDir, "pods", e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		logs, _ := filepath.Glob(filepath.Join(m.cfg.PodLogsDir, "*_*_"+e.Name()))
		for _, dir := range append(logs, filepath.Join(m.cfg.RootDir, "pods", e.Name())) {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
