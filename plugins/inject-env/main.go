// Command inject-env is wasmlet's first-party hook plugin that adds
// environment variables, labels and annotations from its config to every
// container (PreCreate: env, labels, annotations of the CRI container
// config) and sandbox (PreSandbox: labels, annotations), in the style of a
// containerd NRI plugin. Config, one NAME=value per line:
//
//	env: |
//	  CLUSTER=edge-1
//	  REGION=eu
//	labels: |
//	  wasmlet.io/injected=true
//	annotations: |
//	  example.com/owner=platform
//	namespaces: ""   # comma list; empty means every namespace
package main

import (
	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

type injectEnv struct{}

// Hook returns the configured adjustment at PreSandbox and PreCreate.
func (injectEnv) Hook(req sdk.HookRequest) (sdk.Adjustment, error) {
	if req.Point != sdk.HookPreSandbox && req.Point != sdk.HookPreCreate {
		return sdk.Adjustment{}, nil
	}
	if ns := policy.ListSet("namespaces", ""); len(ns) > 0 && !ns[req.Pod.Namespace] {
		return sdk.Adjustment{}, nil
	}
	var adj sdk.Adjustment
	labels, err := policy.Pairs("labels")
	if err != nil {
		return adj, err
	}
	annotations, err := policy.Pairs("annotations")
	if err != nil {
		return adj, err
	}
	adj.Labels = toMap(labels)
	adj.Annotations = toMap(annotations)
	if req.Point == sdk.HookPreCreate {
		env, err := policy.Pairs("env")
		if err != nil {
			return adj, err
		}
		for _, kv := range env {
			adj.Env = append(adj.Env, sdk.EnvVar{Name: kv[0], Value: kv[1]})
		}
	}
	return adj, nil
}

func toMap(pairs [][2]string) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		m[kv[0]] = kv[1]
	}
	return m
}

// init registers the hook; it reads only the pod's namespace.
func init() { sdk.Register(injectEnv{}, sdk.Reads(0)) }

func main() {}
