package admission

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestHostUsers(t *testing.T) {
	for _, tc := range []struct {
		hostUsers *bool
		admit     bool
	}{{nil, true}, {ptr.To(true), true}, {ptr.To(false), false}} {
		p := &v1.Pod{Spec: v1.PodSpec{HostUsers: tc.hostUsers}}
		r, err := HostUsers().Admit(context.Background(), Attributes{Pod: p})
		if err != nil || r.Admit != tc.admit || (!r.Admit && r.Reason != "UserNamespacesUnsupported") {
			t.Errorf("hostUsers %v: %+v %v, want admit %v", tc.hostUsers, r, err, tc.admit)
		}
	}
}
