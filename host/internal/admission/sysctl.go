package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// SysctlsName is the name of the Sysctls admitter.
const SysctlsName = "Sysctls"

// safeSysctls are the kubelet's safe sysctls with the kernel version from
// which each is namespaced ("" for any).
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// Sysctls rejects a pod whose sysctls are neither safe (the kubelet's
// list, as this kernel namespaces them) nor among allowedUnsafe (patterns
// such as "kernel.msg*"), or set a network or IPC sysctl while sharing the
// host's network or IPC namespace — reason "SysctlForbidden", the
// kubelet's.
func Sysctls(allowedUnsafe []string) (Admitter, error) {
	a := sysctls{exact: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	release := kernelRelease()
	for _, s := range safeSysctls {
		if s.kernel == "" || versionAtLeast(release, s.kernel) {
			a.add(s.name)
		}
	}
	for _, p := range allowedUnsafe {
		if err := a.add(p); err != nil {
			return nil, err
		}
	}
	return a, nil
}

type sysctls struct {
	exact, prefixes map[string]utilsysctl.Namespace
}

func (a sysctls) add(pattern string) error {
	ns, name, prefixed := utilsysctl.GetNamespace(pattern)
	if ns == utilsysctl.UnknownNamespace {
		return fmt.Errorf("the sysctls %q are not known to be namespaced", name)
	}
	if prefixed {
		a.prefixes[name] = ns
	} else {
		a.exact[name] = ns
	}
	return nil
}

func (sysctls) Name() string { return SysctlsName }

func (a sysctls) Admit(_ context.Context, at Attributes) (Result, error) {
	sc := at.Pod.Spec.SecurityContext
	if sc == nil {
		return Result{Admit: true}, nil
	}
	for _, s := range sc.Sysctls {
		if err := a.check(s.Name, at.Pod); err != nil {
			return Result{Reason: "SysctlForbidden", Message: fmt.Sprintf("forbidden sysctl: %v", err)}, nil
		}
	}
	return Result{Admit: true}, nil
}

func (a sysctls) check(name string, pod *v1.Pod) error {
	name = utilsysctl.NormalizeName(name)
	ns, ok := a.exact[name]
	if !ok {
		for p, pns := range a.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == utilsysctl.NetNamespace && pod.Spec.HostNetwork) || (ns == utilsysctl.IPCNamespace && pod.Spec.HostIPC) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// kernelRelease is uname -r, "" when unknown.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// versionAtLeast compares the leading major.minor of a kernel release
// ("6.1.0-27-amd64") with min ("4.15"); an unknown release is too old.
func versionAtLeast(release, min string) bool {
	parse := func(s string) (int, int, bool) {
		f := strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
		if len(f) < 2 {
			return 0, 0, false
		}
		maj, err1 := strconv.Atoi(f[0])
		mnr, err2 := strconv.Atoi(f[1])
		return maj, mnr, err1 == nil && err2 == nil
	}
	rm, rn, ok := parse(release)
	mm, mn, _ := parse(min)
	return ok && (rm > mm || rm == mm && rn >= mn)
}
