package objects

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func cmKeyRef(name string) *v1.EnvVarSource {
	return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "k"}}
}

func secretKeyRef(name string) *v1.EnvVarSource {
	return &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: "k"}}
}

func envFrom(cm, secret string) []v1.EnvFromSource {
	return []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}},
		{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: secret}}},
	}
}

func TestReferencedObjects(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "s-pull"}, {Name: ""}},
		Volumes: []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm-vol"}}}},
			{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s-vol"}}},
			{Name: "c", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm-proj"}}},
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s-proj"}}},
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
			{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
		InitContainers: []v1.Container{{
			Name:    "init",
			Env:     []v1.EnvVar{{Name: "A", ValueFrom: cmKeyRef("cm-init-env")}, {Name: "B", ValueFrom: secretKeyRef("s-init-env")}},
			EnvFrom: envFrom("cm-init-from", "s-init-from"),
		}},
		Containers: []v1.Container{{
			Name: "main",
			Env: []v1.EnvVar{
				{Name: "A", ValueFrom: cmKeyRef("cm-env")},
				{Name: "B", ValueFrom: secretKeyRef("s-env")},
				{Name: "C", Value: "plain"},
				{Name: "D", ValueFrom: cmKeyRef("cm-vol")}, // repeated
			},
			EnvFrom: envFrom("cm-from", "s-from"),
		}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name:    "debug",
			Env:     []v1.EnvVar{{Name: "A", ValueFrom: cmKeyRef("cm-eph-env")}, {Name: "B", ValueFrom: secretKeyRef("s-eph-env")}},
			EnvFrom: envFrom("cm-eph-from", "s-eph-from"),
		}}},
	}}
	cms, secrets := ReferencedObjects(pod)
	wantCMs := []string{"cm-env", "cm-eph-env", "cm-eph-from", "cm-from", "cm-init-env", "cm-init-from", "cm-proj", "cm-vol"}
	wantSecrets := []string{"s-env", "s-eph-env", "s-eph-from", "s-from", "s-init-env", "s-init-from", "s-proj", "s-pull", "s-vol"}
	if !slices.Equal(cms, wantCMs) {
		t.Errorf("configMaps = %q, want %q", cms, wantCMs)
	}
	if !slices.Equal(secrets, wantSecrets) {
		t.Errorf("secrets = %q, want %q", secrets, wantSecrets)
	}
}

func TestReferencedObjectsNone(t *testing.T) {
	for _, pod := range []*v1.Pod{nil, {}} {
		if cms, secrets := ReferencedObjects(pod); len(cms) != 0 || len(secrets) != 0 {
			t.Errorf("ReferencedObjects(%v) = %q, %q; want none", pod, cms, secrets)
		}
	}
}
