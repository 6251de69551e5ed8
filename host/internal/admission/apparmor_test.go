package admission

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAppArmor_Admit(t *testing.T) {
	empty := ""
	profile := func(t v1.AppArmorProfileType, name *string) *v1.SecurityContext {
		return &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: t, LocalhostProfile: name}}
	}
	pod := func(ann map[string]string, podSC *v1.PodSecurityContext, sc *v1.SecurityContext) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann},
			Spec: v1.PodSpec{SecurityContext: podSC, Containers: []v1.Container{{Name: "c", SecurityContext: sc}}}}
	}
	const notEnabled = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	for _, tc := range []struct {
		name    string
		enabled bool
		pod     *v1.Pod
		want    string // "" admits
	}{
		{name: "no profile, no AppArmor", pod: pod(nil, nil, nil)},
		{name: "unconfined field, no AppArmor", pod: pod(nil, nil, profile(v1.AppArmorProfileTypeUnconfined, nil))},
		{name: "unconfined annotation, no AppArmor", pod: pod(map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": "unconfined"}, nil, nil)},
		{name: "runtime default field, no AppArmor", pod: pod(nil, nil, profile(v1.AppArmorProfileTypeRuntimeDefault, nil)), want: notEnabled},
		{name: "runtime default annotation, no AppArmor", pod: pod(map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": "runtime/default"}, nil, nil), want: notEnabled},
		{name: "pod-level profile, no AppArmor", pod: pod(nil, &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}, nil), want: notEnabled},
		{name: "the container's unconfined wins over the pod's", pod: pod(nil, &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}, profile(v1.AppArmorProfileTypeUnconfined, nil))},
		{name: "runtime default with AppArmor", enabled: true, pod: pod(nil, nil, profile(v1.AppArmorProfileTypeRuntimeDefault, nil))},
		{name: "empty localhost profile with AppArmor", enabled: true, pod: pod(nil, nil, profile(v1.AppArmorProfileTypeLocalhost, &empty)),
			want: "Cannot enforce AppArmor: invalid empty AppArmor localhost profile name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := AppArmor(func() bool { return tc.enabled }).Admit(context.Background(), Attributes{Pod: tc.pod})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !r.Admit {
					t.Errorf("rejected: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != "AppArmor" || len(r.Message) < len(tc.want) || r.Message[:len(tc.want)] != tc.want {
				t.Errorf("result %+v, want reason AppArmor and a message starting %q", r, tc.want)
			}
		})
	}
}
