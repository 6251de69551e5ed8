// Command memhog is the test plugin of hack/plugin-memory.sh: an admission
// policy that, asked about a pod annotated wasmlet.io/memhog: "true", fills
// memory until its memory cap stops it (the fault the script repeats), and
// allows every other pod.
package main

import "github.com/wasmlet/wasmlet/sdk"

type memhog struct{}

// hoard keeps what Admit fills, as a leak would.
var hoard [][]byte

// Admit fills memory, a MiB at a time, every page written, for a pod
// annotated wasmlet.io/memhog: "true".
func (memhog) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	if req.Pod.Annotations["wasmlet.io/memhog"] != "true" {
		return sdk.Allow(), nil
	}
	for {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		hoard = append(hoard, b)
	}
}

func init() { sdk.Register(memhog{}, sdk.Reads(sdk.Labels)) }

func main() {}
