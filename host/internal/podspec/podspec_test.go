package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestName(t *testing.T) {
	if got := Name(nil); got != "" {
		t.Errorf("Name(nil) = %q, want empty", got)
	}
	p := &v1.Pod{}
	p.Namespace, p.Name = "ns", "web"
	if got := Name(p); got != "ns/web" {
		t.Errorf("Name = %q, want ns/web", got)
	}
}

func TestFindContainer(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "init", Image: "i"}},
		Containers:          []v1.Container{{Name: "app", Image: "a"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "d"}}},
	}}
	for _, tc := range []struct{ name, image string }{{"init", "i"}, {"app", "a"}, {"debug", "d"}} {
		c := FindContainer(pod, tc.name)
		if c == nil || c.Image != tc.image {
			t.Errorf("FindContainer(%q) = %+v, want image %q", tc.name, c, tc.image)
		}
	}
	if c := FindContainer(pod, "app"); c != &pod.Spec.Containers[0] {
		t.Errorf("FindContainer(app) is not the spec's own container")
	}
	if c := FindContainer(pod, "none"); c != nil {
		t.Errorf("FindContainer(none) = %+v, want nil", c)
	}
}

func TestContainerPort(t *testing.T) {
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "bad", ContainerPort: 70000}}}
	for _, tc := range []struct {
		port    intstr.IntOrString
		want    int
		wantErr string
	}{
		{intstr.FromInt32(80), 80, ""},
		{intstr.FromString("http"), 8080, ""},
		{intstr.FromString("9090"), 9090, ""},
		{intstr.FromString("metrics"), 0, "couldn't find port: metrics in app"},
		{intstr.FromInt32(0), 0, "invalid port number: 0"},
		{intstr.FromInt32(65536), 0, "invalid port number: 65536"},
		{intstr.FromString("bad"), 0, "invalid port number: 70000"},
		{intstr.FromString("-1"), 0, "invalid port number: -1"},
	} {
		got, err := ContainerPort(c, tc.port)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("ContainerPort(%v) = %d, %v; want error %q", tc.port.String(), got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ContainerPort(%v) = %d, %v; want %d", tc.port.String(), got, err, tc.want)
		}
	}
}
