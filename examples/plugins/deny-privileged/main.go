// Command deny-privileged is an example admission plugin written with the
// wasmlet Go SDK: it denies a pod when any of its containers (init, app or
// ephemeral) asks for a privileged security context. With config
// "allowNamespaces" (comma-separated) it lets pods of those namespaces
// through.
//
// Build it with hack/build-plugins.sh, or by hand:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o deny-privileged.wasm .
package main

import (
	"strings"

	"github.com/wasmlet/wasmlet/sdk"
)

// policy is the plugin; it implements sdk.Admitter only.
type policy struct{}

// Admit denies privileged containers.
func (policy) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	pod := &req.Pod
	if allowed, ok := sdk.Config("allowNamespaces"); ok {
		for _, ns := range strings.Split(allowed, ",") {
			if strings.TrimSpace(ns) == pod.Namespace {
				return sdk.Allow(), nil
			}
		}
	}
	for _, c := range pod.Spec.AllContainers() {
		if c.SecurityContext.IsPrivileged() {
			return sdk.Deny("Privileged", "container "+c.Name+" of pod "+pod.Namespace+"/"+pod.Name+
				" asks for a privileged security context"), nil
		}
	}
	return sdk.Allow(), nil
}

// init registers the policy. It reads only basic fields (namespace, each
// container's name and security context), so it asks for no optional part
// of the pod: decoding the rest would cost more than the whole check.
func init() { sdk.Register(policy{}, sdk.Reads(0)) }

// main never runs in a c-shared wasm module; it is here because a Go program
// needs one.
func main() {}
