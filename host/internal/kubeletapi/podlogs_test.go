package kubeletapi

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodLogs(t *testing.T) {
	web := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "init"}},
			Containers:          []v1.Container{{Name: "app"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		},
	}
	pods := func(namespace, name string) (*v1.Pod, bool) {
		if namespace == "default" && name == "web" {
			return web, true
		}
		return nil, false
	}
	logs := PodLogs(pods, func(_ context.Context, p *v1.Pod, container string, previous bool) (string, func() bool, error) {
		if previous {
			return "", nil, errors.New("no previous")
		}
		return "/logs/" + p.Name + "/" + container, nil, nil
	})
	for _, c := range []string{"init", "app", "debug"} {
		if path, _, err := logs.LogFile(context.Background(), "default", "web", c, false); err != nil || path != "/logs/web/"+c {
			t.Errorf("%s: %q %v", c, path, err)
		}
	}
	tests := []struct {
		namespace, pod, container string
		previous                  bool
		want                      string
		notFound                  bool
	}{
		{"default", "nope", "app", false, `pod "nope" does not exist`, true},
		{"other", "web", "app", false, `pod "web" does not exist`, true},
		{"default", "web", "nope", false, `container "nope" not found in pod "web"`, true},
		{"default", "web", "app", true, "no previous", false},
	}
	for _, tt := range tests {
		_, _, err := logs.LogFile(context.Background(), tt.namespace, tt.pod, tt.container, tt.previous)
		if err == nil || err.Error() != tt.want || errors.Is(err, ErrNotFound) != tt.notFound {
			t.Errorf("%+v: %v", tt, err)
		}
	}
}
