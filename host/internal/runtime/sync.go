package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's crash-loop back-off: 10 s doubling to 5 min.
const (
	BackOffInitial = 10 * time.Second
	BackOffMax     = 5 * time.Minute
)

// NewBackOff returns the crash-loop and image-pull back-off the agent
// passes to every SyncPod (keyed by pod and container).
func NewBackOff() *flowcontrol.Backoff {
	return flowcontrol.NewBackOff(BackOffInitial, BackOffMax)
}

// SyncPod brings the pod's sandbox and containers to its spec, in the
// kubelet's seven steps: 1 compute actions; 2 kill the pod if its sandbox
// changed; 3 kill unwanted containers; 4 create the sandbox; 5 ephemeral
// containers; 6 the next init container; 7 app containers. status is the
// pod's state read from the runtime (GetPodStatus, or the PLEG cache).
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *container.PodStatus, backOff *flowcontrol.Backoff) (result container.SyncResult) {
	if status == nil {
		status = &container.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	who := pod.Namespace + "/" + pod.Name
	if m.probeKillRunning(pod.UID) {
		// A container of the pod is being killed for a failed probe
		// (KillContainer): the kubelet makes that kill within the pod's
		// sync and does nothing else for the pod until it ends; the
		// prober asks for a sync once it has.
		m.log.Debug("sync pod: a kill for a failed probe runs; nothing done", "pod", who)
		return result
	}
	m.postStopExited(ctx, pod, status)
	// Step 1.
	a := computePodActions(pod, status, m.started())
	resizes := m.computeResize(pod, status, &a)
	m.log.Trace("sync pod", "pod", who, "killPod", a.KillPod, "createSandbox", a.CreateSandbox, "attempt", a.Attempt,
		"start", len(a.ContainersToStart), "kill", len(a.ContainersToKill), "nextInit", a.NextInitContainerToStart != nil)

	// Step 2 / 3.
	if a.KillPod {
		if err := m.KillPod(ctx, pod, status, nil); err != nil {
			result.Add("KillPod", who, fmt.Errorf("%w: %v", container.ErrKillPod, err), err.Error())
			return result
		}
		if a.CreateSandbox {
			m.purgeInitContainers(ctx, pod, status)
		}
	} else {
		for id, k := range a.ContainersToKill {
			if err := m.killContainer(ctx, pod, k.container, id, k.message, nil); err != nil {
				result.Add("KillContainer", k.name, fmt.Errorf("%w: %v", container.ErrKillContainer, err), err.Error())
				return result
			}
		}
	}

	// The running containers whose allocation changed, resized in place.
	if len(resizes) > 0 {
		if err := m.resizePod(ctx, pod, resizes); err != nil {
			result.Add("ResizePod", who, fmt.Errorf("%w: %v", container.ErrResizePod, err), err.Error())
		} else {
			result.Add("ResizePod", who, nil, "")
		}
	}

	// Step 4.
	sandboxID, podIPs := a.SandboxID, status.IPs
	var sbConfig *runtimeapi.PodSandboxConfig
	if a.CreateSandbox {
		cfg, id, ips, err := m.createSandbox(ctx, pod, a.Attempt)
		if err != nil {
			result.Add("CreatePodSandbox", who, fmt.Errorf("%w: %v", container.ErrCreateSandbox, err), err.Error())
			return result
		}
		result.Add("CreatePodSandbox", who, nil, "")
		sandboxID, podIPs, sbConfig = id, ips, cfg
	}
	if sandboxID == "" || (!a.CreateSandbox && a.KillPod) {
		return result
	}
	if len(a.EphemeralContainersToStart) == 0 && a.NextInitContainerToStart == nil && len(a.ContainersToStart) == 0 && len(a.SidecarsToRestart) == 0 {
		// Nothing to start (the steady state of a running pod): no sandbox
		// config to build.
		return result
	}
	if sbConfig == nil {
		// An existing sandbox: rebuild its config as the kubelet does (the
		// PreSandbox hook ran when it was created and is not run again).
		sbConfig = m.sandboxConfig(pod, a.Attempt)
	}

	start := func(kind string, c *v1.Container) error {
		err, msg := m.startContainer(ctx, sandboxID, sbConfig, pod, c, status, podIPs, backOff)
		m.setReason(pod.UID, c.Name, err, msg)
		result.Add("StartContainer", c.Name, err, msg)
		if err != nil && err != container.ErrCrashLoopBackOff && err != container.ErrImagePullBackOff {
			m.log.Info("start "+kind+" failed", "pod", who, "container", c.Name, "reason", err, "message", msg)
		}
		return err
	}
	// Step 5.
	for _, i := range a.EphemeralContainersToStart {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		start("ephemeral container", &c)
	}
	// Step 6.
	if c := a.NextInitContainerToStart; c != nil {
		if err := start("init container", c); err != nil {
			return result
		}
	}
	// Step 7: sidecars that exited, then the app containers.
	for _, c := range a.SidecarsToRestart {
		start("sidecar", c)
	}
	for _, i := range a.ContainersToStart {
		start("container", &pod.Spec.Containers[i])
	}
	return result
}

// createSandbox resolves the pod's runtime handler, runs the PreSandbox
// hook, makes the log directory and runs the sandbox; it returns the config
// it ran the sandbox with (hook adjustments included, so the containers are
// created against the same config), the sandbox's ID and IPs.
func (m *Manager) createSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, string, []string, error) {
	if !pod.Spec.HostNetwork {
		if err := m.networkReady(ctx); err != nil {
			return nil, "", nil, err
		}
	}
	handler, err := m.runtimeHandler(pod)
	if err != nil {
		return nil, "", nil, err
	}
	if err := checkHostname(pod, m.cfg.ClusterDomain); err != nil {
		return nil, "", nil, err
	}
	cfg := m.sandboxConfig(pod, attempt)
	if m.cfg.DNS != nil {
		dc, warning, err := m.cfg.DNS.ForPod(pod)
		if err != nil {
			return nil, "", nil, fmt.Errorf("DNS config: %w", err)
		}
		if warning != "" {
			m.log.Warn("pod DNS config", "pod", pod.Namespace+"/"+pod.Name, "warning", warning)
		}
		cfg.DnsConfig = dc
	}
	if m.cfg.Hooks != nil {
		adj, err := m.cfg.Hooks.Hook(ctx, container.HookPreSandbox, pod, nil)
		if err != nil {
			return nil, "", nil, fmt.Errorf("PreSandbox hook: %w", err)
		}
		adj.ApplySandbox(cfg)
	}
	if err := m.podDirs(cfg.LogDirectory, pod); err != nil {
		return nil, "", nil, err
	}
	if m.cfg.Cgroups != nil {
		if err := m.cfg.Cgroups.Ensure(pod); err != nil {
			return nil, "", nil, err
		}
	}
	id, err := m.rs.RunPodSandbox(ctx, cfg, handler)
	if err != nil {
		return nil, "", nil, err
	}
	if pod.Spec.HostNetwork {
		return cfg, id, nil, nil
	}
	resp, err := m.rs.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return nil, "", nil, fmt.Errorf("status of new sandbox %s: %w", id, err)
	}
	return cfg, id, sandboxIPs(resp.GetStatus()), nil
}

// runtimeHandler is the CRI handler of the pod's RuntimeClass, looked up
// before anything of the sandbox is made (the kubelet looks it up just
// before RunPodSandbox; nothing observable lies between).
func (m *Manager) runtimeHandler(pod *v1.Pod) (string, error) {
	if m.cfg.RuntimeClasses != nil {
		return m.cfg.RuntimeClasses.Handler(pod)
	}
	if pod.Spec.RuntimeClassName != nil && *pod.Spec.RuntimeClassName != "" {
		return "", fmt.Errorf("pod %s/%s: spec.runtimeClassName %q: this runtime manager resolves no RuntimeClasses", pod.Namespace, pod.Name, *pod.Spec.RuntimeClassName)
	}
	return "", nil
}

// podDirs makes the pod's log directory and <RootDir>/pods/<uid>.
func (m *Manager) podDirs(logDir string, pod *v1.Pod) error {
	defer m.fsLock()()
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("pod log directory: %w", err)
	}
	if err := os.MkdirAll(m.PodDir(pod.UID), 0o750); err != nil {
		return fmt.Errorf("pod directory: %w", err)
	}
	return nil
}

// backOffKey identifies a container across restarts, as the kubelet's
// getStableKey.
func backOffKey(pod *v1.Pod, c *v1.Container) string {
	return pod.Name + "_" + pod.Namespace + "_" + string(pod.UID) + "_" + c.Name + "_" + HashContainer(c)
}

// startContainer checks the back-off, pulls the image, runs the PreCreate
// hook, creates and starts the container and runs the PostStart hook. It
// returns one of the Err* reasons and a message.
func (m *Manager) startContainer(ctx context.Context, sandboxID string, sbConfig *runtimeapi.PodSandboxConfig, pod *v1.Pod, c *v1.Container, status *container.PodStatus, podIPs []string, backOff *flowcontrol.Backoff) (error, string) {
	last := status.FindContainer(c.Name)
	if last != nil && last.State == container.StateExited && backOff != nil {
		key := backOffKey(pod, c)
		if backOff.IsInBackOffSince(key, last.FinishedAt) {
			return container.ErrCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backOff.Get(key), c.Name, pod.Name, pod.Namespace, pod.UID)
		}
		backOff.Next(key, last.FinishedAt)
	}
	imageRef, err, msg := m.ensureImage(ctx, pod, c, sbConfig, backOff)
	if err != nil {
		return err, msg
	}
	if err := m.checkNonRoot(ctx, pod, c, imageRef); err != nil {
		return container.ErrCreateContainerConfig, err.Error()
	}
	restartCount := 0
	if last != nil {
		restartCount = last.RestartCount + 1
	}
	var adj *container.Adjustment
	if m.cfg.Hooks != nil {
		adj, err = m.cfg.Hooks.Hook(ctx, container.HookPreCreate, pod, c)
		if err != nil {
			return container.ErrPreCreateHook, err.Error()
		}
	}
	cfg, err := m.containerConfig(ctx, pod, c, restartCount, imageRef, podIPs)
	if err != nil {
		return container.ErrCreateContainerConfig, err.Error()
	}
	if m.cfg.Devices != nil {
		if err := m.cfg.Devices.ApplyDevices(ctx, pod, c, cfg); err != nil {
			return container.ErrCreateContainerConfig, err.Error()
		}
	}
	if m.cfg.Hooks != nil {
		// The hooks' adjustments go over the config the pod spec made;
		// validators see the result and may refuse it, as the kubelet
		// refuses a config it cannot make.
		adj.ApplyContainer(cfg)
		if err := m.cfg.Hooks.Validate(ctx, pod, c, cfg, adj); err != nil {
			return container.ErrCreateContainerConfig, err.Error()
		}
	}
	id, err := m.rs.CreateContainer(ctx, sandboxID, cfg, sbConfig)
	if err != nil {
		return container.ErrCreateContainer, err.Error()
	}
	if err := m.rs.StartContainer(ctx, id); err != nil {
		return container.ErrRunContainer, err.Error()
	}
	m.linkLog(pod, c.Name, id, filepath.Join(m.PodLogDir(pod.Namespace, pod.Name, pod.UID), cfg.LogPath))
	if m.cfg.Actuation != nil {
		// The instance runs with the container's allocation.
		m.cfg.Actuation.SetActuated(pod.UID, c.Name, c.Resources)
	}
	if m.cfg.Hooks != nil {
		if _, err := m.cfg.Hooks.Hook(ctx, container.HookPostStart, pod, c); err != nil {
			msg := fmt.Sprintf("PostStart hook: %v", err)
			m.killContainer(ctx, pod, c, id, msg, nil)
			return container.ErrRunContainer, msg
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		// The kubelet runs postStart before it reports the container
		// started; a failure kills the container (FailedPostStartHook).
		if out, err := m.runHandler(ctx, pod, c, id, c.Lifecycle.PostStart, podIPs); err != nil {
			msg := fmt.Sprintf("PostStartHookError: %v", err)
			m.log.Info("postStart hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "error", err, "output", out)
			m.killContainer(ctx, pod, c, id, "FailedPostStartHook", nil)
			return container.ErrPostStartHook, msg
		}
	}
	return nil, ""
}

// purgeInitContainers removes the pod's dead init containers before a new
// sandbox, so its init containers run again.
func (m *Manager) purgeInitContainers(ctx context.Context, pod *v1.Pod, status *container.PodStatus) {
	names := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		names[c.Name] = true
	}
	for _, c := range status.Containers {
		if names[c.Name] && c.State != container.StateRunning {
			if err := m.rs.RemoveContainer(ctx, c.ID); err != nil {
				m.log.Warn("remove init container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "id", c.ID, "error", err)
				continue
			}
			m.unlinkLog(c.ID)
		}
	}
}
