package podenv

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/objects"
)

// Config is where a Resolver finds what a container's environment is made
// of.
type Config struct {
	// Objects gives the ConfigMaps and Secrets that env and envFrom
	// reference. Nil: any such reference is an error saying the node has
	// no source of ConfigMaps and Secrets (optional ones included, as
	// the kubelet without an API client does).
	Objects objects.Source
	// Services gives the services whose variables the containers get.
	// Nil: no service variables (the kubelet without an API server).
	Services objects.Services
	// Node returns the node, whose allocatable resources are the default
	// of a container's unset limits for resourceFieldRef. Nil, or
	// returning nil: a resourceFieldRef is an error.
	Node func() *v1.Node
	// HostIPs are the node's IPs, for status.hostIP (the first) and
	// status.hostIPs; the first also decides which family of the pod's
	// IPs comes first. Empty means the InternalIP addresses of Node().
	HostIPs []string
	// VolumePath gives the host path of a pod's volume, where a
	// fileKeyRef's env file is read. Nil: a fileKeyRef is an error.
	VolumePath VolumePath
}

// EnvVar is one variable of a container's environment.
type EnvVar struct {
	// Name is the variable's name.
	Name string
	// Value is its value.
	Value string
}

// Resolver computes containers' environments. It is safe for concurrent
// use if its Config's sources are.
type Resolver struct {
	objects  objects.Source
	services objects.Services
	node     func() *v1.Node
	hostIPs  []string
	volPath  VolumePath
}

// New returns a Resolver reading cfg's sources.
func New(cfg Config) *Resolver {
	return &Resolver{
		objects:  cfg.Objects,
		services: cfg.Services,
		node:     cfg.Node,
		hostIPs:  append([]string(nil), cfg.HostIPs...),
		volPath:  cfg.VolumePath,
	}
}

// nodeIPs are the configured host IPs, else the node's InternalIPs.
func (r *Resolver) nodeIPs() []string {
	if len(r.hostIPs) > 0 || r.node == nil {
		return r.hostIPs
	}
	n := r.node()
	if n == nil {
		return nil
	}
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips
}

// Env is the environment of container c of pod, with the kubelet's
// precedence: the service variables (the master service's always; with
// enableServiceLinks nil or true, those of every service of the pod's
// namespace), overridden by envFrom (each ConfigMap's or Secret's keys in
// order, with the source's prefix; a missing optional source is
// skipped), overridden by env in order: a value with its $(VAR)
// references expanded against the variables so far (envFrom and earlier
// env first, then the service variables), or a valueFrom (fieldRef,
// resourceFieldRef, configMapKeyRef, secretKeyRef; a missing optional
// object or key leaves the variable out). podIPs are the pod sandbox's
// IPs.
//
// The result lists the envFrom and env variables in the order they were
// first set, then the service variables they do not override. An error
// reads as the kubelet's; the kubelet reports it as the container's
// CreateContainerConfigError.
func (r *Resolver) Env(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]EnvVar, error) {
	if pod.Spec.HostNetwork && len(podIPs) == 0 {
		// A host-network pod's IPs are the node's, as its status shows.
		podIPs = r.nodeIPs()
	}
	svc, err := r.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
	serviceVars := envMap(svc)
	objs := r.objectCache(pod.Namespace)
	env := orderedEnv{values: map[string]string{}}

	for _, from := range c.EnvFrom {
		if err := r.addEnvFrom(ctx, &env, objs, from); err != nil {
			return nil, err
		}
	}

	lookup := lookupIn(env.values, serviceVars)
	for _, e := range c.Env {
		if e.Value != "" || e.ValueFrom == nil {
			env.set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := r.valueFrom(ctx, objs, pod, c, podIPs, e)
		if err != nil {
			return nil, err
		}
		if ok {
			env.set(e.Name, v)
		}
	}

	out := env.list()
	for _, s := range svc {
		if _, ok := env.values[s.Name]; !ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// valueFrom is the value of e's valueFrom; false when it is an optional
// reference to a missing object or key (the variable is left out).
func (r *Resolver) valueFrom(ctx context.Context, objs *objectCache, pod *v1.Pod, c *v1.Container, podIPs []string, e v1.EnvVar) (string, bool, error) {
	from := e.ValueFrom
	switch {
	case from.FieldRef != nil:
		if v := from.FieldRef.APIVersion; v != "" && v != "v1" {
			return "", false, fmt.Errorf("unsupported pod version: %s", v)
		}
		v, err := FieldValue(pod, from.FieldRef.FieldPath, podIPs, r.nodeIPs())
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		var node *v1.Node
		if r.node != nil {
			node = r.node()
		}
		if node == nil {
			return "", false, fmt.Errorf("failed to find node object, expected a node")
		}
		v, err := ResourceValue(from.ResourceFieldRef, pod, c, node)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		return objs.configMapKey(ctx, from.ConfigMapKeyRef)
	case from.SecretKeyRef != nil:
		return objs.secretKey(ctx, from.SecretKeyRef)
	case from.FileKeyRef != nil:
		return fileKey(r.volPath, pod, e.Name, from.FileKeyRef)
	}
	// A valueFrom with no source the kubelet knows gives an empty value.
	return "", true, nil
}

// addEnvFrom sets the variables of one envFrom source.
func (r *Resolver) addEnvFrom(ctx context.Context, env *orderedEnv, objs *objectCache, from v1.EnvFromSource) error {
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		cm, err := objs.configMap(ctx, from.ConfigMapRef.Name, isTrue(from.ConfigMapRef.Optional))
		if err != nil || cm == nil {
			return err
		}
		data = cm.Data
	case from.SecretRef != nil:
		s, err := objs.secret(ctx, from.SecretRef.Name, isTrue(from.SecretRef.Optional))
		if err != nil || s == nil {
			return err
		}
		data = secretData(s)
	default:
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if !usableName(k) {
			// The API allows no such key; one from a local source
			// could not be passed to the container.
			continue
		}
		env.set(from.Prefix+k, data[k])
	}
	return nil
}

// isTrue is *b, false for nil.
func isTrue(b *bool) bool { return b != nil && *b }
