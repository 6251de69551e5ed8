package extension

import (
	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/container"
)

// The core (config, runtime) has its own types; the plugin ABI has its own,
// frozen per ABI version. The functions below are the only place where one
// becomes the other, so a new ABI version changes this file and not the
// core. Each switch is explicit on purpose: convert_test.go reads the
// constants of abi, config and runtime from their source and fails when one
// has no case here.

// opFromABI is the core's operation for a source plugin's; false for an
// operation ABI v1 does not define (RECONCILE is the merge's own, never a
// source's).
func opFromABI(op abi.Op) (config.Op, bool) {
	switch op {
	case abi.OpSet:
		return config.OpSet, true
	case abi.OpAdd:
		return config.OpAdd, true
	case abi.OpUpdate:
		return config.OpUpdate, true
	case abi.OpRemove:
		return config.OpRemove, true
	case abi.OpDelete:
		return config.OpDelete, true
	}
	return "", false
}

// opToABI is the ABI's operation for the core's; false for
// config.OpReconcile, which only the merge produces.
func opToABI(op config.Op) (abi.Op, bool) {
	switch op {
	case config.OpSet:
		return abi.OpSet, true
	case config.OpAdd:
		return abi.OpAdd, true
	case config.OpUpdate:
		return abi.OpUpdate, true
	case config.OpRemove:
		return abi.OpRemove, true
	case config.OpDelete:
		return abi.OpDelete, true
	}
	return "", false
}

// hookPointToABI is the ABI's lifecycle point for the runtime's; false for a
// point the ABI does not define.
func hookPointToABI(p container.HookPoint) (abi.HookPoint, bool) {
	switch p {
	case container.HookPreSandbox:
		return abi.HookPreSandbox, true
	case container.HookPreCreate:
		return abi.HookPreCreate, true
	case container.HookPostStart:
		return abi.HookPostStart, true
	case container.HookPreStop:
		return abi.HookPreStop, true
	case container.HookPodTerminated:
		return abi.HookPodTerminated, true
	}
	return "", false
}

// hookPointFromABI is the runtime's lifecycle point for the ABI's; false for
// a point the runtime does not know.
func hookPointFromABI(p abi.HookPoint) (container.HookPoint, bool) {
	switch p {
	case abi.HookPreSandbox:
		return container.HookPreSandbox, true
	case abi.HookPreCreate:
		return container.HookPreCreate, true
	case abi.HookPostStart:
		return container.HookPostStart, true
	case abi.HookPreStop:
		return container.HookPreStop, true
	case abi.HookPodTerminated:
		return container.HookPodTerminated, true
	}
	return "", false
}

// adjustmentFromABI is the runtime's adjustment for a hook plugin's (nil for
// nil). The maps are shared, not copied.
func adjustmentFromABI(a *abi.Adjustment) *container.Adjustment {
	if a == nil {
		return nil
	}
	out := &container.Adjustment{Labels: a.Labels, Annotations: a.Annotations}
	if len(a.Env) > 0 {
		out.Env = make([]container.EnvVar, len(a.Env))
		for i, v := range a.Env {
			out.Env[i] = container.EnvVar{Name: v.Name, Value: v.Value}
		}
	}
	return out
}
