package admission

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSysctls(t *testing.T) {
	a, err := Sysctls([]string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(hostNet bool, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, SecurityContext: &v1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"none", &v1.Pod{}, ""},
		{"safe", pod(false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), ""},
		{"allowed unsafe by prefix", pod(false, "kernel.msgmax"), ""},
		{"allowed unsafe, slash form", pod(false, "net/core/somaxconn"), ""},
		{"unsafe", pod(false, "kernel.shm_rmid_forced", "kernel.shmmax"), `forbidden sysctl: "kernel.shmmax" not allowlisted`},
		{"net sysctl with host network", pod(true, "net.core.somaxconn"), `not allowed with host Net enabled`},
	} {
		r, err := a.Admit(context.Background(), Attributes{Pod: c.pod})
		if err != nil || r.Admit != (c.want == "") || c.want != "" && (r.Reason != "SysctlForbidden" || !strings.Contains(r.Message, c.want)) {
			t.Errorf("%s: %+v, %v; want %q", c.name, r, err, c.want)
		}
	}
	if _, err := Sysctls([]string{"fs.file-max"}); err == nil {
		t.Error("a sysctl not known to be namespaced was accepted")
	}
	if !versionAtLeast("6.1.0-27-amd64", "4.15") || versionAtLeast("4.9.0", "4.15") || versionAtLeast("", "3.16") {
		t.Error("kernel version comparison")
	}
}
