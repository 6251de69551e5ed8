package container

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// Hooks is called at pod and container lifecycle points; Wasm hook plugins
// implement it (host/internal/extension translates to and from the plugin
// ABI). container is nil at pod points. The returned adjustment is honoured
// at HookPreSandbox (labels, annotations) and HookPreCreate (env, labels,
// annotations); an error fails that step.
type Hooks interface {
	// Hook is called at point for pod (and c, at container points); it
	// returns the adjustment to apply, nil for none.
	Hook(ctx context.Context, point HookPoint, pod *v1.Pod, c *v1.Container) (*Adjustment, error)
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
	// HookPostStart is called after a container started; an error kills
	// the container.
	HookPostStart HookPoint = "PostStart"
	// HookPreStop is called before a container is stopped.
	HookPreStop HookPoint = "PreStop"
	// HookPodTerminated is called once a pod's containers and sandbox are
	// gone.
	HookPodTerminated HookPoint = "PodTerminated"
)

// Adjustment is a change Hooks ask for at HookPreSandbox or HookPreCreate,
// in the style of containerd NRI: it is laid over the CRI config the
// runtime built from the pod spec.
type Adjustment struct {
	// Env variables are set in the container, replacing same-named ones
	// (HookPreCreate only).
	Env []EnvVar
	// Labels are added to the sandbox or container config.
	Labels map[string]string
	// Annotations are added to the sandbox or container config.
	Annotations map[string]string
}

// EnvVar is one environment variable of an Adjustment.
type EnvVar struct {
	// Name of the variable.
	Name string
	// Value of the variable.
	Value string
}
