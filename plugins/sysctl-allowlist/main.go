// Command sysctl-allowlist is the kubelet's sysctl admission check as a
// wasmlet plugin: a pod may set only the kubelet's safe sysctls plus those
// allowed by config (the kubelet's --allowed-unsafe-sysctls; an entry ending
// in "*" is a prefix), and no network sysctl with hostNetwork nor IPC sysctl
// with hostIPC. Config:
//
//	allowed: "kernel.msg*, net.core.somaxconn"
//
// The reason is the kubelet's "SysctlForbidden".
package main

import (
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

// Safe are the kubelet's safe sysctls (pkg/kubelet/sysctl, Kubernetes 1.34).
var Safe = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
}

type sysctlAllowlist struct{}

// Admit checks the pod's sysctls.
func (sysctlAllowlist) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	pod := &req.Pod
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return sdk.Allow(), nil
	}
	allowed := policy.List("allowed", "")
	for _, s := range sc.Sysctls {
		name := Normalize(s.Name)
		if !Match(name, Safe) && !Match(name, allowed) {
			return forbidden(pod, s.Name, "not allowlisted"), nil
		}
		if pod.Spec.HostNetwork && strings.HasPrefix(name, "net.") {
			return forbidden(pod, s.Name, "not allowed with host net enabled"), nil
		}
		if pod.Spec.HostIPC && ipc(name) {
			return forbidden(pod, s.Name, "not allowed with host ipc enabled"), nil
		}
	}
	return sdk.Allow(), nil
}

func forbidden(pod *sdk.Pod, name, why string) sdk.Verdict {
	return sdk.Deny("SysctlForbidden", "pod "+pod.Namespace+"/"+pod.Name+": forbidden sysctl: \""+name+"\" "+why)
}

// Normalize turns a sysctl written with "/" separators ("net/ipv4/x") into
// the dotted form, as the kubelet does.
func Normalize(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	first := strings.IndexAny(name, "./")
	if first >= 0 && name[first] == '.' {
		return name // dotted already; a "/" inside is part of a name
	}
	return strings.ReplaceAll(name, "/", ".")
}

// Match reports whether name is listed, an entry ending in "*" matching
// by prefix.
func Match(name string, allowed []string) bool {
	for _, a := range allowed {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if a == name {
			return true
		}
	}
	return false
}

// ipc reports whether a sysctl belongs to the IPC namespace.
func ipc(name string) bool {
	return name == "kernel.sem" || strings.HasPrefix(name, "kernel.shm") ||
		strings.HasPrefix(name, "kernel.msg") || strings.HasPrefix(name, "fs.mqueue.")
}

// init registers the policy; it reads only basic fields (the pod's security
// context, host namespaces).
func init() { sdk.Register(sysctlAllowlist{}, sdk.Reads(0)) }

func main() {}
