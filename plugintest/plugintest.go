// Package plugintest runs a compiled wasmlet plugin in `go test` through
// wasmlet's real plugin host (host/plugin), the way proxy-wasm-go-sdk's
// proxytest runs a filter: the .wasm is loaded, sandboxed and called exactly
// as the agent would, so a test exercises the SDK's exports, its decoder and
// encoder, and the host's ABI checks together.
//
//	func TestWasm(t *testing.T) {
//		p := plugintest.Load(t, plugintest.Build(t, "plugins/no-privileged"), map[string]string{"mode": "strict"})
//		resp := p.Admit(podJSON)
//		if resp.Allowed { t.Fatal("privileged pod admitted") }
//	}
//
// It lives in wasmlet's root module, beside the host it imports, and not in
// the SDK's module: a plugin's own module holds only the SDK (and its native
// test helper sdk/sdktest), nothing of the host. Build compiles a plugin
// directory in that directory's own module.
package plugintest

import (
	"context"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/internal/wasmbuild"
)

// Plugin is a plugin loaded through the real host, closed when the test ends.
type Plugin struct {
	tb testing.TB
	p  *plugin.Plugin
}

// Load loads path (a .wasm, or a manifest *.plugin.yaml) with config merged
// over the manifest's config, and fails the test if it does not load. The
// host uses a compilation cache shared by all tests (see CacheDir).
func Load(tb testing.TB, path string, config map[string]string) *Plugin {
	tb.Helper()
	return LoadWith(tb, plugin.LoadConfig{Path: path, PluginConfig: config})
}

// LoadWith loads a plugin with a host configuration of its own (logger, node
// info, deadlines, pool size). An empty Config.CacheDir gets CacheDir().
func LoadWith(tb testing.TB, lc plugin.LoadConfig) *Plugin {
	tb.Helper()
	p, err := TryLoad(lc)
	if err != nil {
		tb.Fatalf("plugintest: %v", err)
	}
	tb.Cleanup(func() { p.Close(context.Background()) })
	return &Plugin{tb: tb, p: p}
}

// TryLoad loads a plugin like LoadWith but returns the error, for tests of
// load failures. The caller closes the plugin.
func TryLoad(lc plugin.LoadConfig) (*plugin.Plugin, error) {
	if lc.Config.CacheDir == "" {
		lc.Config.CacheDir = CacheDir()
	}
	return plugin.Load(context.Background(), lc)
}

// Host returns the host-side plugin, for calls and figures plugintest does
// not wrap (Call, Exports, Imports).
func (p *Plugin) Host() *plugin.Plugin { return p.p }

// Admit asks the plugin about a pod (v1.Pod JSON) and fails the test if the
// call fails.
func (p *Plugin) Admit(pod []byte) abi.AdmitResponse {
	p.tb.Helper()
	resp, err := p.AdmitRequest(abi.AdmitRequest{Pod: pod})
	if err != nil {
		p.tb.Fatalf("plugintest: admit: %v", err)
	}
	return resp
}

// AdmitRequest sends a full admission request and returns the response and
// the call's error (trap, timeout, bad result, or the response's error
// field), without failing the test.
func (p *Plugin) AdmitRequest(req abi.AdmitRequest) (abi.AdmitResponse, error) {
	resp, err := p.p.Admit(context.Background(), &req)
	if resp == nil {
		return abi.AdmitResponse{}, err
	}
	return *resp, err
}

// Source polls a source plugin.
func (p *Plugin) Source(req abi.SourceRequest) (abi.SourceResponse, error) {
	resp, err := p.p.Source(context.Background(), &req)
	if resp == nil {
		return abi.SourceResponse{}, err
	}
	return *resp, err
}

// Hook calls a hook plugin.
func (p *Plugin) Hook(req abi.HookRequest) (abi.HookResponse, error) {
	resp, err := p.p.Hook(context.Background(), &req)
	if resp == nil {
		return abi.HookResponse{}, err
	}
	return *resp, err
}

// CacheDir is where plugintest keeps built modules and wazero's compilation
// cache: $WASMLET_SDKTEST_CACHE, else wasmlet/sdktest in the user cache
// directory.
func CacheDir() string { return wasmbuild.CacheDir() }

// Build compiles the Go plugin package in dir for wasip1 (-buildmode=c-shared),
// in the module that holds dir, and returns the .wasm's path. The output lives in CacheDir, so when nothing
// changed `go build` only checks it is up to date. It fails the test on a
// build error, with the compiler's output.
func Build(tb testing.TB, dir string) string {
	tb.Helper()
	path, err := BuildGo(dir)
	if err != nil {
		tb.Fatalf("plugintest: %v", err)
	}
	return path
}

// BuildGo is Build without a testing.TB, for benchmarks' setup and tools.
func BuildGo(dir string) (string, error) { return wasmbuild.Go(dir) }
