package container

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Hooks is called at pod and container lifecycle points; Wasm hook plugins
// implement it (host/internal/extension translates to and from the plugin
// ABI). container is nil at pod points. The adjustment Hook returns is
// honoured at HookPreSandbox (ApplySandbox) and HookPreCreate
// (ApplyContainer); an error fails that step.
type Hooks interface {
	// Hook is called at point for pod (and c, at container points); it
	// returns the merged adjustment of every hook to apply, nil for none.
	Hook(ctx context.Context, point HookPoint, pod *v1.Pod, c *v1.Container) (*Adjustment, error)
	// Validate is called with c's final CRI config, after adj (what Hook
	// returned at HookPreCreate, nil for none) was applied to it; an error
	// refuses the container (CreateContainerConfigError).
	Validate(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig, adj *Adjustment) error
	// PreUpdate is called before c's resources are changed to resources;
	// an error keeps them unchanged.
	PreUpdate(ctx context.Context, pod *v1.Pod, c *v1.Container, resources *runtimeapi.LinuxContainerResources) error
	// PostStop is called once c has stopped; it observes only, an error is
	// for the log.
	PostStop(ctx context.Context, pod *v1.Pod, c *v1.Container, exit Exit) error
	// Subscribed reports whether any hook is called at point, so that the
	// caller gathers what the point needs (a stopped container's status for
	// HookPostStop) only then.
	Subscribed(point HookPoint) bool
}

// Exit is how a container stopped, as HookPostStop reports it.
type Exit struct {
	// Code is the exit code; nil when the runtime reports none.
	Code *int32
	// Reason is the runtime's reason ("Completed", "Error", "OOMKilled").
	Reason string
}

// HookPoint is a pod or container lifecycle point at which Hooks are called.
type HookPoint string

// The lifecycle points, in lifecycle order.
const (
	// HookPreSandbox is called before a pod's sandbox is created; the
	// adjustment's labels and annotations go into the sandbox config.
	HookPreSandbox HookPoint = "PreSandbox"
	// HookPreCreate is called before a container is created; the
	// adjustment's env, labels and annotations go into its config.
	HookPreCreate HookPoint = "PreCreate"
	// HookValidate is called with a container's final config, after every
	// PreCreate adjustment; a refusal keeps the container from being created.
	HookValidate HookPoint = "Validate"
	// HookPostStart is called after a container started; an error kills
	// the container.
	HookPostStart HookPoint = "PostStart"
	// HookPreUpdate is called before a running container's resources are
	// changed; an error keeps them unchanged.
	HookPreUpdate HookPoint = "PreUpdate"
	// HookPreStop is called before a container is stopped.
	HookPreStop HookPoint = "PreStop"
	// HookPostStop is called once a container has stopped, with its exit
	// code and reason.
	HookPostStop HookPoint = "PostStop"
	// HookPodTerminated is called once a pod's containers and sandbox are
	// gone.
	HookPodTerminated HookPoint = "PodTerminated"
)

// Adjustment is the merged change Hooks ask for at HookPreSandbox or
// HookPreCreate, in the style of containerd NRI: it is laid over the CRI
// config the runtime built from the pod spec (ApplySandbox,
// ApplyContainer). The CRI's own types carry mounts, devices and resources;
// a zero resource field is left as the pod spec set it.
type Adjustment struct {
	// Env variables are set in the container, replacing same-named ones
	// (HookPreCreate only).
	Env []EnvVar
	// Labels are added to the sandbox or container config.
	Labels map[string]string
	// Annotations are added to the sandbox or container config.
	Annotations map[string]string
	// Mounts are added to the container; one at a container path the pod
	// mounts replaces the pod's.
	Mounts []*runtimeapi.Mount
	// Devices are added to the container; one at a container path the pod
	// has replaces the pod's.
	Devices []*runtimeapi.Device
	// CDIDevices are fully qualified CDI device names added to the
	// container.
	CDIDevices []string
	// Resources' non-zero fields replace the container's; hugepage limits
	// replace those of the same page size. OomScoreAdj is not read here.
	Resources *runtimeapi.LinuxContainerResources
	// OOMScoreAdj, when set, replaces the container's OOM score adjustment.
	OOMScoreAdj *int64
	// Sysctls are set on the sandbox (HookPreSandbox only).
	Sysctls map[string]string
	// Remove takes away what the pod spec put in the config, before the
	// rest is laid over it.
	Remove Removal
	// Owners names the hook that set each adjusted item, by conflict key
	// ("mounts:/data"); the runtime hands it to Validate.
	Owners map[string]string
}

// Removal names env variables, mounts (by container path) and annotations
// an Adjustment takes away.
type Removal struct {
	// Env are variable names.
	Env []string
	// Mounts are container paths.
	Mounts []string
	// Annotations are annotation keys.
	Annotations []string
}

// EnvVar is one environment variable of an Adjustment.
type EnvVar struct {
	// Name of the variable.
	Name string
	// Value of the variable.
	Value string
}
