package podenv

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func testNode() *v1.Node {
	return &v1.Node{Status: v1.NodeStatus{Allocatable: rl(
		"cpu", "3500m", "memory", "8Gi", "ephemeral-storage", "100Gi", "hugepages-2Mi", "1Gi",
	)}}
}

func resourcePod() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
			Limits: rl("cpu", "250m"),
		}}, {Name: "init-unset"}},
		Containers: []v1.Container{
			{Name: "main", Resources: v1.ResourceRequirements{
				Requests: rl("cpu", "1250m", "memory", "64Mi", "ephemeral-storage", "1Gi", "hugepages-2Mi", "4Mi"),
				Limits:   rl("cpu", "2", "memory", "128Mi", "ephemeral-storage", "2G", "hugepages-2Mi", "6Mi"),
			}},
			{Name: "unset"},
			{Name: "zero", Resources: v1.ResourceRequirements{Limits: rl("cpu", "0", "memory", "0")}},
		},
	}}
}

func TestResourceValue(t *testing.T) {
	pod := resourcePod()
	main := &pod.Spec.Containers[0]
	unset := &pod.Spec.Containers[1]
	q := resource.MustParse
	for _, tc := range []struct {
		name     string
		fs       v1.ResourceFieldSelector
		c        *v1.Container
		node     *v1.Node
		want     string
		err      string
		podLimit v1.ResourceList
	}{
		{name: "limits.cpu", fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, c: main, want: "2"},
		{name: "limits.cpu 1m", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, c: main, want: "2000"},
		{name: "requests.cpu rounds up", fs: v1.ResourceFieldSelector{Resource: "requests.cpu"}, c: main, want: "2"},
		{name: "requests.cpu 1m", fs: v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: q("1m")}, c: main, want: "1250"},
		{name: "zero divisor is 1", fs: v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: q("0")}, c: main, want: "2"},
		{name: "limits.memory", fs: v1.ResourceFieldSelector{Resource: "limits.memory"}, c: main, want: "134217728"},
		{name: "limits.memory 1Mi", fs: v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}, c: main, want: "128"},
		{name: "requests.memory 1Mi", fs: v1.ResourceFieldSelector{Resource: "requests.memory", Divisor: q("1Mi")}, c: main, want: "64"},
		{name: "memory rounds up", fs: v1.ResourceFieldSelector{Resource: "requests.memory", Divisor: q("1G")}, c: main, want: "1"},
		{name: "limits.ephemeral-storage 1M", fs: v1.ResourceFieldSelector{Resource: "limits.ephemeral-storage", Divisor: q("1M")}, c: main, want: "2000"},
		{name: "requests.ephemeral-storage 1Gi", fs: v1.ResourceFieldSelector{Resource: "requests.ephemeral-storage", Divisor: q("1Gi")}, c: main, want: "1"},
		{name: "limits hugepages", fs: v1.ResourceFieldSelector{Resource: "limits.hugepages-2Mi", Divisor: q("1Mi")}, c: main, want: "6"},
		{name: "requests hugepages", fs: v1.ResourceFieldSelector{Resource: "requests.hugepages-2Mi", Divisor: q("1Mi")}, c: main, want: "4"},
		{name: "unset limits.cpu is allocatable", fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, c: unset, node: testNode(), want: "4"},
		{name: "unset limits.cpu 1m", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, c: unset, node: testNode(), want: "3500"},
		{name: "unset limits.memory 1Mi", fs: v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}, c: unset, node: testNode(), want: "8192"},
		{name: "unset limits.ephemeral-storage 1Gi", fs: v1.ResourceFieldSelector{Resource: "limits.ephemeral-storage", Divisor: q("1Gi")}, c: unset, node: testNode(), want: "100"},
		{name: "hugepages never defaulted", fs: v1.ResourceFieldSelector{Resource: "limits.hugepages-2Mi"}, c: unset, node: testNode(), want: "0"},
		{name: "requests never defaulted", fs: v1.ResourceFieldSelector{Resource: "requests.cpu"}, c: unset, node: testNode(), want: "0"},
		{name: "set limit wins over allocatable", fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, c: main, node: testNode(), want: "2"},
		{name: "zero limit is allocatable", fs: v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Gi")}, c: &pod.Spec.Containers[2], node: testNode(), want: "8"},
		{name: "no node, no default", fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, c: unset, want: "0"},
		{name: "pod-level limit", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, c: unset, node: testNode(),
			podLimit: rl("cpu", "1250m"), want: "1250"},
		{name: "pod-level limit, container limit wins", fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, c: main, node: testNode(),
			podLimit: rl("cpu", "1250m"), want: "2"},
		{name: "pod-level memory only", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1m")}, c: unset, node: testNode(),
			podLimit: rl("memory", "1Gi"), want: "3500"},
		{name: "named container", fs: v1.ResourceFieldSelector{Resource: "limits.memory", ContainerName: "main", Divisor: q("1Mi")}, c: unset, want: "128"},
		{name: "named container defaulted", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "unset"}, c: main, node: testNode(), want: "4"},
		{name: "named init container", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "init", Divisor: q("1m")}, want: "250"},
		{name: "named init container defaulted", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "init-unset", Divisor: q("1m")}, node: testNode(), want: "3500"},
		{name: "unknown container", fs: v1.ResourceFieldSelector{Resource: "limits.cpu", ContainerName: "nope"}, err: "container nope not found"},
		{name: "no container", fs: v1.ResourceFieldSelector{Resource: "limits.cpu"}, err: "no container for resource limits.cpu"},
		{name: "unsupported", fs: v1.ResourceFieldSelector{Resource: "limits.gpu"}, c: main, err: "unsupported container resource : limits.gpu"},
		{name: "unsupported kind", fs: v1.ResourceFieldSelector{Resource: "cpu"}, c: main, err: "unsupported container resource : cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod
			if tc.podLimit != nil {
				p = pod.DeepCopy()
				p.Spec.Resources = &v1.ResourceRequirements{Limits: tc.podLimit}
			}
			got, err := ResourceValue(&tc.fs, p, tc.c, tc.node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, ok := pod.Spec.Containers[1].Resources.Limits["cpu"]; ok {
		t.Error("ResourceValue modified the pod's limits")
	}
}
