package config

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestValidateStatic(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(p *v1.Pod)
		wantErr string // the field path the error must name; "" for valid
	}{
		{"valid", func(p *v1.Pod) {}, ""},
		{"bad pod name", func(p *v1.Pod) { p.Name = "Web_1" }, "metadata.name"},
		{"bad namespace", func(p *v1.Pod) { p.Namespace = "a.b" }, "metadata.namespace"},
		{"bad label", func(p *v1.Pod) { p.Labels = map[string]string{"a": "b c"} }, "metadata.labels"},
		{"annotations over 256 KiB", func(p *v1.Pod) { p.Annotations = map[string]string{"big": strings.Repeat("x", 256<<10)} }, "metadata.annotations: Too long"},
		{"bad annotation key", func(p *v1.Pod) { p.Annotations = map[string]string{"a b": ""} }, "metadata.annotations"},
		{"bad container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "C" }, "spec.containers[0].name"},
		{"duplicate container name", func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "c", Image: "i"}} }, "spec.containers[0].name: Duplicate"},
		{"image with space", func(p *v1.Pod) { p.Spec.Containers[0].Image = " img" }, "spec.containers[0].image"},
		{"negative cpu", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("-1")}
		}, "spec.containers[0].resources.limits[cpu]"},
		{"requests over limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Mi")}
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Mi")}
		}, "spec.containers[0].resources.requests[memory]"},
		{"unknown resource", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"gpus": resource.MustParse("1")}
		}, "spec.containers[0].resources.limits[gpus]"},
		{"extended resource", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/gpu": resource.MustParse("1")}
		}, ""},
		{"port out of range", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000, Protocol: v1.ProtocolTCP}}
		}, "spec.containers[0].ports[0].containerPort"},
		{"bad env name", func(p *v1.Pod) { p.Spec.Containers[0].Env = []v1.EnvVar{{Name: ""}} }, "spec.containers[0].env[0].name"},
		{"mount of no volume", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}}
		}, "spec.containers[0].volumeMounts[0].name: Not found"},
		{"volume of two types", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
		}, "spec.volumes[0]"},
		{"duplicate volume", func(p *v1.Pod) {
			e := v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: e}, {Name: "v", VolumeSource: e}}
		}, "spec.volumes[1].name: Duplicate"},
		{"probe without handler", func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe = &v1.Probe{} }, "spec.containers[0].livenessProbe"},
		{"bad restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy"},
		{"zero active deadline", func(p *v1.Pod) { z := int64(0); p.Spec.ActiveDeadlineSeconds = &z }, "spec.activeDeadlineSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod("web-n1", "uid-1", "busybox:1.36")
			tt.edit(p)
			ApplyPodDefaults(p)
			err := ValidateStatic(p)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("valid pod refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
			}
		})
	}
}
