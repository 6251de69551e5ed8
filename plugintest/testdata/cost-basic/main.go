// Command cost-basic is an SDK admission plugin registered with
// sdk.Reads(0) that allows every pod: the cost of the SDK's glue and of
// decoding a pod's basic fields (BenchmarkGuestCost).
package main

import "github.com/wasmlet/wasmlet/sdk"

type allowAll struct{}

func (allowAll) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	if req.Pod.Name == "" {
		return sdk.Deny("NoName", "the pod has no name"), nil
	}
	return sdk.Allow(), nil
}

func init() { sdk.Register(allowAll{}, sdk.Reads(0)) }

func main() {}
