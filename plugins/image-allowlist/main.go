// Command image-allowlist is the first-party admission policy that lets a
// pod run only images from allowed registries or repository prefixes, as a
// plugin of its own; the policy and its config are package
// plugins/internal/imageallowlist.
package main

import (
	"github.com/wasmlet/wasmlet/plugins/internal/imageallowlist"
	"github.com/wasmlet/wasmlet/sdk"
)

// init registers the policy with what it reads.
func init() {
	p := imageallowlist.Policy()
	sdk.Register(p.Admitter, p.Reads)
}

func main() {}
