// Package requirelimits is wasmlet's first-party admission policy that
// denies a pod unless every init and app container sets limits for the
// listed resources. The plugins require-limits (alone) and policy-bundle
// (with the other first-party policies) run it. Config (in a bundle each
// key may be prefixed "require-limits."):
//
//	resources: "cpu,memory"   # the resources every container must limit
//	exemptNamespaces: ""
package requirelimits

import (
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

// Policy is the policy as its plugin registers it: named require-limits (its
// manifest name), reading the containers' resources besides basic fields.
func Policy() sdk.Policy {
	return sdk.Policy{Name: "require-limits", Admitter: admitter{}, Reads: sdk.Reads(sdk.Resources)}
}

type admitter struct{}

// Admit checks every init and app container's limits (ephemeral containers
// have no resources in Kubernetes).
func (admitter) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	pod := &req.Pod
	if policy.Exempt(pod.Namespace, "") {
		return sdk.Allow(), nil
	}
	resources := policy.List("resources", "cpu,memory")
	for _, list := range [][]sdk.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			var missing []string
			for _, r := range resources {
				if q, ok := c.Resources.Limits[r]; !ok || q == "" {
					missing = append(missing, r)
				}
			}
			if len(missing) > 0 {
				return sdk.Deny("MissingLimits", "container "+c.Name+" of pod "+pod.Namespace+"/"+pod.Name+
					" has no "+strings.Join(missing, " and ")+" limit"), nil
			}
		}
	}
	return sdk.Allow(), nil
}
