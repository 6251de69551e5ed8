// Command policy-bundle runs the four first-party admission policies —
// no-privileged, image-allowlist, require-limits and sysctl-allowlist, in
// the order of their own plugins' manifests — in one module (an sdk
// Bundle): an admission decodes the pod once and runs one Go runtime's code
// instead of four. It denies what the first policy that denies denies, its
// message starting with that policy's name ("no-privileged: container …").
//
// Config: each policy's keys (see plugins/internal/noprivileged,
// imageallowlist, requirelimits, sysctlallowlist), prefixed with the
// policy's name; a key without a prefix is the default for every policy
// that has no key of its own:
//
//	no-privileged.denyHostNamespaces: "false"
//	image-allowlist.allowed: registry.k8s.io, docker.io/library
//	require-limits.exemptNamespaces: default
//	exemptNamespaces: kube-system   # every policy without its own
//
// Load it instead of the four plugins, not beside them (both would work,
// each pod checked twice).
package main

import (
	"github.com/wasmlet/wasmlet/plugins/internal/imageallowlist"
	"github.com/wasmlet/wasmlet/plugins/internal/noprivileged"
	"github.com/wasmlet/wasmlet/plugins/internal/requirelimits"
	"github.com/wasmlet/wasmlet/plugins/internal/sysctlallowlist"
	"github.com/wasmlet/wasmlet/sdk"
)

// policies are the bundle's policies in the order they run: the order of
// their plugins' manifests.
func policies() []sdk.Policy {
	return []sdk.Policy{noprivileged.Policy(), imageallowlist.Policy(), requirelimits.Policy(), sysctlallowlist.Policy()}
}

// init registers the bundle, reading the union of what its policies read.
func init() { sdk.RegisterPolicies(policies()...) }

func main() {}
