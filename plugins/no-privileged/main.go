// Command no-privileged is the first-party admission policy against
// privileged pods (privileged containers, added capabilities, host
// namespaces) as a plugin of its own; the policy and its config are
// package plugins/internal/noprivileged.
package main

import (
	"github.com/wasmlet/wasmlet/plugins/internal/noprivileged"
	"github.com/wasmlet/wasmlet/sdk"
)

// init registers the policy with what it reads.
func init() {
	p := noprivileged.Policy()
	sdk.Register(p.Admitter, p.Reads)
}

func main() {}
