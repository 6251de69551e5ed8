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
	"fmt"
	"slices"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// RunFixtures runs the cases of the Go plugin in dir as subtests
// native/CASE: the request JSON through sdk.Handle with the plugin the test
// binary registered (so call it from the plugin's own package, dir "."), and
// the case's config (the manifest's, with the case's laid over it) served by
// an sdk.NativeHost.
//
// An admission case fails when the plugin returns an error or its verdict
// differs from the case's expect block; a hook case when its outcome
// (adjustment, refusal, error) differs, or the manifest would not let the
// host call the plugin at the case's point or apply its adjustment. It
// also fails when the plugin handles a point (sdk.Points) that the
// manifest's points leave out. A directory without a manifest or without
// cases fails the test. The subtests run one after another: they swap the
// process-wide native host.
func RunFixtures(t *testing.T, dir string) {
	t.Helper()
	t.Run("native", func(t *testing.T) {
		if m, err := fixture.ReadManifest(dir); err == nil {
			for _, msg := range uncalled(m, sdk.Points()) {
				t.Error(msg)
			}
		}
		RunCases(t, dir, Runner{Admit: admitNative, Hook: hookNative})
	})
}

// uncalled says which of the points a plugin handles, beyond the initial
// five, a hook plugin's manifest m leaves out of its points.
func uncalled(m abi.Manifest, handled []abi.HookPoint) []string {
	var out []string
	if !m.HasKind(abi.KindHook) {
		return nil
	}
	for _, p := range handled {
		if !slices.Contains(abi.DefaultHookPoints, p) && !m.CallsAt(p) {
			out = append(out, fmt.Sprintf("the plugin handles %s, which the manifest's points %v leave out: the host never calls it there", p, m.Points))
		}
	}
	return out
}

// AdmitFunc asks one build of a plugin about req with config; it fails t when
// it cannot get an answer.
type AdmitFunc func(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse

// HookFunc calls one build of a hook plugin with req and config and returns
// its response, Error set when the plugin failed; it fails t when it cannot
// get an answer at all (a trap, garbage).
type HookFunc func(t *testing.T, config map[string]string, req abi.HookRequest) abi.HookResponse

// Runner is one way of running a plugin: what RunCases calls for admission
// cases and for hook cases.
type Runner struct {
	// Admit runs admission cases.
	Admit AdmitFunc
	// Hook runs hook cases.
	Hook HookFunc
}

// RunCases reads dir's manifest and cases and runs each case as a subtest
// through r, with the case's merged config, and checks its outcome. It is
// RunFixtures for any way of running the plugin.
func RunCases(t *testing.T, dir string, r Runner) {
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
			if err := RunCase(t, m, &c, r); err != nil {
				t.Errorf("%s: %v", c.File, err)
			}
		})
	}
}

// RunCase runs one case of a plugin with manifest m through r and returns
// what differs from its expectation.
func RunCase(t *testing.T, m abi.Manifest, c *fixture.Case, r Runner) error {
	t.Helper()
	config := c.MergedConfig(m.Config)
	if !c.IsHook() {
		if r.Admit == nil {
			return fmt.Errorf("an admission case, and this runner runs only hook cases")
		}
		return c.Check(r.Admit(t, config, c.Request()))
	}
	if r.Hook == nil {
		return fmt.Errorf("a hook case, and this runner runs only admission cases")
	}
	req, err := c.HookRequest()
	if err != nil {
		return err
	}
	return c.CheckHook(m, r.Hook(t, config, req))
}

// useConfig serves config through a native host until the test ends.
func useConfig(t *testing.T, config map[string]string) {
	prev := sdk.UseNativeHost(&sdk.NativeHost{Config: config})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
}

// admitNative runs the test binary's registered plugin through sdk.Handle
// with config served by a native host, restored when the test ends.
func admitNative(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse {
	useConfig(t, config)
	var resp abi.AdmitResponse
	handleNative(t, sdk.KindAdmission, req, &resp)
	return resp
}

// hookNative is admitNative for a hook request.
func hookNative(t *testing.T, config map[string]string, req abi.HookRequest) abi.HookResponse {
	useConfig(t, config)
	var resp abi.HookResponse
	handleNative(t, sdk.KindHook, req, &resp)
	return resp
}

// handleNative runs req through sdk.Handle as kind and decodes the response
// into resp.
func handleNative(t *testing.T, kind sdk.Kind, req, resp any) {
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sdk.Handle(kind, in), resp); err != nil {
		t.Fatalf("sdktest: native response: %v", err)
	}
}
