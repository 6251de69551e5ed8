package plugintest

import (
	"context"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

// RunFixtures runs the cases of the Go plugin in dir — the layout
// `wasmlet plugin test DIR` reads: dir/plugin.yaml, whose config is every
// case's default, and one case per dir/tests/*.yaml (format in package
// sdk/sdktest/fixture), admission and hook cases — as subtests wasm/CASE:
// dir built for wasip1 (Build) and called through wasmlet's real plugin
// host (Load), a fresh load per case with the case's config. The plugin's
// own module runs the same cases natively (sdktest.RunFixtures).
//
// An admission case fails when the plugin returns an error or its verdict
// differs from the case's expect block; a hook case when its adjustment,
// refusal or error differs, or the manifest would not let the host call the
// plugin at the case's point or apply its adjustment. A directory without a
// manifest or without cases fails the test.
//
//	func TestPolicy_Fixtures(t *testing.T) { plugintest.RunFixtures(t, "plugins/no-privileged") }
func RunFixtures(t *testing.T, dir string) {
	t.Helper()
	t.Run("wasm", func(t *testing.T) { RunModuleFixtures(t, dir, Build(t, dir)) })
}

// RunModuleFixtures runs the cases of the plugin directory dir, one subtest
// per case, against the compiled module at wasm however it was built (a C
// plugin with hack/build-plugins.sh, say), a fresh load per case with the
// case's config.
func RunModuleFixtures(t *testing.T, dir, wasm string) {
	t.Helper()
	sdktest.RunCases(t, dir, sdktest.Runner{
		Admit: func(t *testing.T, config map[string]string, req abi.AdmitRequest) abi.AdmitResponse {
			resp, err := Load(t, wasm, config).AdmitRequest(req)
			if err != nil {
				t.Fatalf("plugintest: admit: %v", err)
			}
			return resp
		},
		Hook: func(t *testing.T, config map[string]string, req abi.HookRequest) abi.HookResponse {
			resp, err := Load(t, wasm, config).Host().Hook(context.Background(), &req)
			if resp == nil {
				t.Fatalf("plugintest: hook: %v", err)
			}
			return *resp
		},
	})
}
