// Package shipped runs the plugins this repository ships (plugins/*,
// examples/plugins/*) as .wasm through wasmlet's real plugin host. Their
// own modules test them natively (and hold no host); this package, in the
// root module, is where the compiled modules meet the host: every fixture
// case of every plugin directory, the plugins' other .wasm tests, and the
// example's side-by-side benchmark.
package shipped

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/plugintest"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// root is the repository's root, seen from this package.
const root = "../.."

// TestRunFixtures_Shipped runs every case (tests/*.yaml) of every plugin
// directory under plugins/ and examples/plugins/ as .wasm through the real
// host: a Go plugin built by plugintest.Build, a C one by
// hack/build-plugins.sh. The plugins' modules run the same cases natively.
func TestRunFixtures_Shipped(t *testing.T) {
	var dirs []string
	for _, pattern := range []string{"plugins/*/tests", "examples/plugins/*/tests"} {
		found, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, tests := range found {
			dirs = append(dirs, filepath.Dir(tests))
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no plugin directory with test cases under plugins/ or examples/plugins/")
	}
	for _, dir := range dirs {
		name, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			if goFiles, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(goFiles) > 0 {
				plugintest.RunFixtures(t, dir)
				return
			}
			plugintest.RunModuleFixtures(t, dir, buildScript(t, name))
		})
	}
}

// buildScript builds the plugin directory dir (relative to the repository
// root) with hack/build-plugins.sh and returns its module's path.
func buildScript(t *testing.T, dir string) string {
	t.Helper()
	m, err := fixture.ReadManifest(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(plugintest.CacheDir(), "build", "shipped")
	if msg, err := exec.Command(filepath.Join(root, "hack", "build-plugins.sh"), out, dir).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, strings.TrimSpace(string(msg)))
	}
	return filepath.Join(out, m.Name+".wasm")
}
