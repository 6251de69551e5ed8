// Command sysctl-allowlist is the kubelet's sysctl admission check as a
// plugin of its own; the policy and its config are package
// plugins/internal/sysctlallowlist.
package main

import (
	"github.com/wasmlet/wasmlet/plugins/internal/sysctlallowlist"
	"github.com/wasmlet/wasmlet/sdk"
)

// init registers the policy with what it reads.
func init() {
	p := sysctlallowlist.Policy()
	sdk.Register(p.Admitter, p.Reads)
}

func main() {}
