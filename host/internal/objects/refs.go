package objects

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// ReferencedObjects returns the names of the ConfigMaps and Secrets, all in
// the pod's namespace, that pod references: its configMap and secret
// volumes and the configMap and secret sources of its projected volumes;
// every container's (init, regular and ephemeral) env valueFrom
// configMapKeyRef/secretKeyRef and envFrom configMapRef/secretRef; and its
// imagePullSecrets (secrets). Both lists are sorted and hold each name
// once; empty names are left out. A nil pod references nothing.
func ReferencedObjects(pod *v1.Pod) (configMaps, secrets []string) {
	if pod == nil {
		return nil, nil
	}
	var cms, ss []string
	addCM := func(name string) {
		if name != "" {
			cms = append(cms, name)
		}
	}
	addS := func(name string) {
		if name != "" {
			ss = append(ss, name)
		}
	}
	spec := &pod.Spec
	for _, ref := range spec.ImagePullSecrets {
		addS(ref.Name)
	}
	for i := range spec.Volumes {
		src := &spec.Volumes[i].VolumeSource
		if src.ConfigMap != nil {
			addCM(src.ConfigMap.Name)
		}
		if src.Secret != nil {
			addS(src.Secret.SecretName)
		}
		if src.Projected != nil {
			for _, p := range src.Projected.Sources {
				if p.ConfigMap != nil {
					addCM(p.ConfigMap.Name)
				}
				if p.Secret != nil {
					addS(p.Secret.Name)
				}
			}
		}
	}
	visit := func(env []v1.EnvVar, envFrom []v1.EnvFromSource) {
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				addCM(e.ValueFrom.ConfigMapKeyRef.Name)
			}
			if e.ValueFrom.SecretKeyRef != nil {
				addS(e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range envFrom {
			if e.ConfigMapRef != nil {
				addCM(e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				addS(e.SecretRef.Name)
			}
		}
	}
	for i := range spec.InitContainers {
		visit(spec.InitContainers[i].Env, spec.InitContainers[i].EnvFrom)
	}
	for i := range spec.Containers {
		visit(spec.Containers[i].Env, spec.Containers[i].EnvFrom)
	}
	for i := range spec.EphemeralContainers {
		visit(spec.EphemeralContainers[i].Env, spec.EphemeralContainers[i].EnvFrom)
	}
	return sortedUnique(cms), sortedUnique(ss)
}

// sortedUnique sorts names and drops repeats.
func sortedUnique(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}
