package admission

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodOS(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelOSStable: "linux"}}}
	for _, c := range []struct {
		name   string
		pod    v1.Pod
		reason string
	}{
		{"no OS said", v1.Pod{}, ""},
		{"linux label", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelOSStable: "linux"}}}, ""},
		{"windows label", v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelOSStable: "windows"}}}, "PodOSSelectorNodeLabelDoesNotMatch"},
		{"linux field", v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Linux}}}, ""},
		{"windows field", v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Windows}}}, "PodOSNotSupported"},
	} {
		r, err := PodOS().Admit(context.Background(), Attributes{Pod: &c.pod, Node: node})
		if err != nil || r.Admit != (c.reason == "") || r.Reason != c.reason {
			t.Errorf("%s: %+v, %v; want reason %q", c.name, r, err, c.reason)
		}
	}
}
