// Command require-limits is the first-party admission policy that denies a
// pod unless every init and app container sets limits for the listed
// resources, as a plugin of its own; the policy and its config are package
// plugins/internal/requirelimits.
package main

import (
	"github.com/wasmlet/wasmlet/plugins/internal/requirelimits"
	"github.com/wasmlet/wasmlet/sdk"
)

// init registers the policy with what it reads.
func init() {
	p := requirelimits.Policy()
	sdk.Register(p.Admitter, p.Reads)
}

func main() {}
