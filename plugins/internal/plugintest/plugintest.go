//go:build !wasip1

// Package plugintest runs a first-party admission plugin's fixture cases
// (DIR/tests/*.yaml, the format `wasmlet plugin test DIR` reads) twice: natively
// through sdk.Handle — the same JSON path as the wasm export — and as the
// compiled .wasm through wasmlet's real plugin host (sdk/sdktest).
package plugintest

import (
	"encoding/json"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// Cases reads the manifest template and the cases of dir.
func Cases(t *testing.T, dir string) (abi.Manifest, []fixture.Case) {
	t.Helper()
	m, err := fixture.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := fixture.ReadCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, cases
}

// Native runs dir's cases through sdk.Handle with the test binary's
// registered plugin.
func Native(t *testing.T, dir string) {
	m, cases := Cases(t, dir)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			prev := sdk.UseNativeHost(&sdk.NativeHost{Config: c.MergedConfig(m.Config)})
			t.Cleanup(func() { sdk.UseNativeHost(prev) })
			in, err := json.Marshal(c.Request())
			if err != nil {
				t.Fatal(err)
			}
			var resp abi.AdmitResponse
			if err := json.Unmarshal(sdk.Handle(abi.KindAdmission, in), &resp); err != nil {
				t.Fatal(err)
			}
			if err := c.Check(resp); err != nil {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}
}

// Wasm builds dir for wasip1 and runs its cases through the real host.
func Wasm(t *testing.T, dir string) {
	m, cases := Cases(t, dir)
	wasm := sdktest.Build(t, dir)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			p := sdktest.Load(t, wasm, c.MergedConfig(m.Config))
			resp, err := p.AdmitRequest(c.Request())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Check(resp); err != nil {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}
}
