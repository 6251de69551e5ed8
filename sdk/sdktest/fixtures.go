package sdktest

import (
	"encoding/json"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// RunFixtures runs the admission cases of the Go plugin in dir — the layout
// `wasmlet plugin test DIR` reads: dir/plugin.yaml, whose config is every
// case's default, and one case per dir/tests/*.yaml (format in package
// fixture) — twice, as subtests:
//
//   - native/CASE: the request JSON through sdk.Handle, the same path the
//     wasm export takes, with the plugin the test binary registered (so call
//     it from the plugin's own package, dir "."), and the case's config
//     served by an sdk.NativeHost;
//   - wasm/CASE: dir built for wasip1 (Build) and called through wasmlet's
//     real plugin host (Load), with the same config.
//
// A case fails when the plugin returns an error or its verdict differs from
// the case's expect block. A directory without a manifest or without cases
// fails the test. The subtests run one after another: the native ones swap
// the process-wide native host.
//
//	func TestPolicy_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }
func RunFixtures(t *testing.T, dir string) {
	t.Helper()
	m, err := fixture.ReadManifest(dir)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	cases, err := fixture.ReadCases(dir)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	t.Run("native", func(t *testing.T) {
		runCases(t, m, cases, admitNative)
	})
	t.Run("wasm", func(t *testing.T) {
		wasm := Build(t, dir)
		runCases(t, m, cases, func(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse {
			resp, err := Load(t, wasm, config).AdmitRequest(req)
			if err != nil {
				t.Fatalf("sdktest: admit: %v", err)
			}
			return resp
		})
	})
}

// admitFunc asks one plugin build about req with config.
type admitFunc func(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse

// runCases runs each case as a subtest through admit and checks its verdict.
func runCases(t *testing.T, m abi.Manifest, cases []fixture.Case, admit admitFunc) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			resp := admit(t, c.MergedConfig(m.Config), c.Request())
			if err := c.Check(resp); err != nil {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}
}

// admitNative runs the test binary's registered plugin through sdk.Handle
// with config served by a native host, restored when the test ends.
func admitNative(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse {
	prev := sdk.UseNativeHost(&sdk.NativeHost{Config: config})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var resp abi.AdmitResponse
	if err := json.Unmarshal(sdk.Handle(abi.KindAdmission, in), &resp); err != nil {
		t.Fatalf("sdktest: native response: %v", err)
	}
	return resp
}
