// Package sysctlallowlist is the kubelet's sysctl admission check as a
// wasmlet policy: a pod may set only the kubelet's safe sysctls plus those
// allowed by config (the kubelet's --allowed-unsafe-sysctls; an entry ending
// in "*" is a prefix), and no network sysctl with hostNetwork nor IPC sysctl
// with hostIPC. The plugins sysctl-allowlist (alone) and policy-bundle (with
// the other first-party policies) run it. Config (in a bundle the key may be
// prefixed "sysctl-allowlist."):
//
//	allowed: "kernel.msg*, net.core.somaxconn"
//
// The reason is the kubelet's "SysctlForbidden".
package sysctlallowlist

import (
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

// Policy is the policy as its plugin registers it: named sysctl-allowlist (its
// manifest name), reading only basic fields (the pod's
// security context, host namespaces).
func Policy() sdk.Policy {
	return sdk.Policy{Name: "sysctl-allowlist", Admitter: admitter{}, Reads: sdk.Reads(0)}
}

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

type admitter struct{}

// Admit checks the pod's sysctls.
func (admitter) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
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
