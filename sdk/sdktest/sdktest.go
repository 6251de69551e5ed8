// Package sdktest runs a wasmlet plugin's test cases natively in `go test`,
// in the plugin's own module: the layout `wasmlet plugin test DIR` reads
// (DIR/plugin.yaml and one case per DIR/tests/*.yaml, format in package
// fixture), each case's request JSON through sdk.Handle — the path the wasm
// export takes — with the plugin the test binary registered.
//
//	func TestPolicy_Fixtures(t *testing.T) { sdktest.RunFixtures(t, ".") }
//
// It imports the SDK and never the host: running the compiled .wasm through
// wasmlet's real plugin host is package plugintest's job, in wasmlet's root
// module (plugintest.RunFixtures runs the same cases as .wasm).
package sdktest

import (
	"encoding/json"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// RunFixtures runs the admission cases of the Go plugin in dir as subtests
// native/CASE: the request JSON through sdk.Handle with the plugin the test
// binary registered (so call it from the plugin's own package, dir "."), and
// the case's config (the manifest's, with the case's laid over it) served by
// an sdk.NativeHost.
//
// A case fails when the plugin returns an error or its verdict differs from
// the case's expect block. A directory without a manifest or without cases
// fails the test. The subtests run one after another: they swap the
// process-wide native host.
func RunFixtures(t *testing.T, dir string) {
	t.Helper()
	t.Run("native", func(t *testing.T) {
		RunCases(t, dir, admitNative)
	})
}

// AdmitFunc asks one build of a plugin about req with config; it fails t when
// it cannot get an answer.
type AdmitFunc func(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse

// RunCases reads dir's manifest and cases and runs each case as a subtest
// through admit, with the case's merged config, and checks its verdict. It
// is RunFixtures for any way of running the plugin.
func RunCases(t *testing.T, dir string, admit AdmitFunc) {
	t.Helper()
	m, err := fixture.ReadManifest(dir)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	cases, err := fixture.ReadCases(dir)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
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
	if err := json.Unmarshal(sdk.Handle(sdk.KindAdmission, in), &resp); err != nil {
		t.Fatalf("sdktest: native response: %v", err)
	}
	return resp
}
