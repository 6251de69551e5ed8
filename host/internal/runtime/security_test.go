package runtime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestSecurityContext(t *testing.T) {
	pod := testPod("sc", v1.RestartPolicyNever, "main")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), FSGroup: ptr.To(int64(2000)), SupplementalGroups: []int64{3000},
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	c := &pod.Spec.Containers[0]
	c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr.To(int64(1001)), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)}
	sc := securityContext(pod, c)
	if sc.RunAsUser.GetValue() != 1001 || !sc.NoNewPrivs || !sc.ReadonlyRootfs {
		t.Errorf("user %v, no_new_privs %v, read-only root %v; want 1001, true, true", sc.RunAsUser, sc.NoNewPrivs, sc.ReadonlyRootfs)
	}
	if got := sc.SupplementalGroups; len(got) != 2 || got[0] != 2000 || got[1] != 3000 {
		t.Errorf("supplemental groups %v, want [2000 3000] (fsGroup first, as the kubelet orders them)", got)
	}
	if sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("seccomp %v, want the pod's RuntimeDefault", sc.Seccomp)
	}
	if len(sc.MaskedPaths) == 0 || len(sc.ReadonlyPaths) == 0 {
		t.Error("default procMount masks nothing")
	}
	c.SecurityContext.ProcMount = ptr.To(v1.UnmaskedProcMount)
	if sc := securityContext(pod, c); len(sc.MaskedPaths) != 0 || sc.MaskedPaths == nil {
		t.Errorf("Unmasked procMount: masked %v, want an empty list", sc.MaskedPaths)
	}
	// A privileged container gets the default lists too, as the kubelet
	// sends them (the runtime ignores them for it).
	c.SecurityContext.Privileged, c.SecurityContext.ProcMount = ptr.To(true), nil
	if sc := securityContext(pod, c); !sc.Privileged || len(sc.MaskedPaths) == 0 || len(sc.ReadonlyPaths) == 0 {
		t.Errorf("privileged: %v, masked %v, read-only %v", sc.Privileged, sc.MaskedPaths, sc.ReadonlyPaths)
	}
}

func TestVerifyRunAsNonRoot(t *testing.T) {
	pod := testPod("nr", v1.RestartPolicyNever, "main")
	c := &pod.Spec.Containers[0]
	root, user := int64(0), int64(1234)
	if err := verifyRunAsNonRoot(pod, c, &root, ""); err != nil {
		t.Errorf("no runAsNonRoot: %v", err)
	}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	for _, tc := range []struct {
		runAs    *int64
		uid      *int64
		username string
		want     string
	}{
		{nil, &root, "", "image will run as root"},
		{nil, &user, "", ""},
		{nil, nil, "nobody", "non-numeric user (nobody)"},
		{&root, &user, "", "runAsUser breaks non-root policy"},
		{&user, &root, "", ""},
	} {
		c.SecurityContext = &v1.SecurityContext{RunAsUser: tc.runAs}
		err := verifyRunAsNonRoot(pod, c, tc.uid, tc.username)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runAsUser %v image uid %v user %q: %v, want %q", tc.runAs, tc.uid, tc.username, err, tc.want)
		}
	}
}

func TestSandboxPrivileged(t *testing.T) {
	m := &Manager{}
	pod := testPod("priv", v1.RestartPolicyNever, "a", "b")
	if m.sandboxConfig(pod, 0).Linux.SecurityContext.Privileged {
		t.Error("a sandbox of unprivileged containers is privileged")
	}
	pod.Spec.Containers[1].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	if !m.sandboxConfig(pod, 0).Linux.SecurityContext.Privileged {
		t.Error("a sandbox holding a privileged container is not privileged (containerd refuses the container)")
	}
}
