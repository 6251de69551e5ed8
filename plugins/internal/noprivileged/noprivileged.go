// Package noprivileged is wasmlet's first-party admission policy against
// privileged pods: it denies a pod when a container (init, app or
// ephemeral) is privileged, adds a Linux capability outside an allow-list,
// or when the pod shares the node's network, PID or IPC namespace. The
// plugins no-privileged (alone) and policy-bundle (with the other
// first-party policies) run it. Each check is configurable (manifest
// config; in a bundle each key may be prefixed "no-privileged."):
//
//	denyPrivileged: "true"        # privileged containers
//	allowedCapabilities: "..."    # comma list of capabilities a container may add;
//	                              # default the Pod Security Standards' baseline set; "*" allows any
//	denyHostNamespaces: "true"    # hostNetwork, hostPID, hostIPC
//	exemptNamespaces: kube-system # pods of these namespaces are not checked
package noprivileged

import (
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

// BaselineCapabilities are the capabilities the Pod Security Standards'
// baseline profile lets a container add.
const BaselineCapabilities = "AUDIT_WRITE,CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,MKNOD,NET_BIND_SERVICE,SETFCAP,SETGID,SETPCAP,SETUID,SYS_CHROOT"

// Policy is the policy as its plugin registers it: named no-privileged (its
// manifest name), reading only basic fields (host namespaces,
// security contexts).
func Policy() sdk.Policy {
	return sdk.Policy{Name: "no-privileged", Admitter: admitter{}, Reads: sdk.Reads(0)}
}

type admitter struct{}

// Admit checks the pod.
func (admitter) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	pod := &req.Pod
	if policy.Exempt(pod.Namespace, "kube-system") {
		return sdk.Allow(), nil
	}
	name := pod.Namespace + "/" + pod.Name
	denyPriv, err := policy.Bool("denyPrivileged", true)
	if err != nil {
		return sdk.Verdict{}, err
	}
	denyHost, err := policy.Bool("denyHostNamespaces", true)
	if err != nil {
		return sdk.Verdict{}, err
	}
	if denyHost {
		for _, ns := range []struct {
			on   bool
			name string
		}{{pod.Spec.HostNetwork, "hostNetwork"}, {pod.Spec.HostPID, "hostPID"}, {pod.Spec.HostIPC, "hostIPC"}} {
			if ns.on {
				return sdk.Deny("HostNamespace", "pod "+name+" asks for "+ns.name), nil
			}
		}
	}
	allowed := policy.ListSet("allowedCapabilities", BaselineCapabilities)
	for _, c := range pod.Spec.AllContainers() {
		if denyPriv && c.SecurityContext.IsPrivileged() {
			return sdk.Deny("Privileged", "container "+c.Name+" of pod "+name+" asks for a privileged security context"), nil
		}
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || allowed["*"] {
			continue
		}
		for _, cp := range c.SecurityContext.Capabilities.Add {
			if !allowed[strings.TrimPrefix(strings.ToUpper(cp), "CAP_")] {
				return sdk.Deny("CapabilityNotAllowed", "container "+c.Name+" of pod "+name+" adds capability "+cp), nil
			}
		}
	}
	return sdk.Allow(), nil
}
