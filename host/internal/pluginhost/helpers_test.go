package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

//go:generate sh testdata/gen.sh

var (
	goGuestOnce sync.Once
	goGuestPath string
	goGuestErr  error
)

// goGuest builds testdata/goguest (standard Go, wasip1, c-shared) once per
// test binary and returns the .wasm path.
func goGuest(tb testing.TB) string {
	tb.Helper()
	goGuestOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wasmlet-goguest-")
		if err != nil {
			goGuestErr = err
			return
		}
		goGuestPath = filepath.Join(dir, "goguest.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", goGuestPath, ".")
		cmd.Dir = "testdata/goguest"
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			goGuestErr = &buildError{err: err, out: string(out)}
		}
	})
	if goGuestErr != nil {
		tb.Fatalf("building testdata/goguest: %v", goGuestErr)
	}
	return goGuestPath
}

var (
	cacheOnce sync.Once
	cacheDir  string
)

// testCacheDir is a compilation cache directory shared by the tests and
// benchmarks of one run, so the Go guest compiles once per deadline mode.
func testCacheDir(tb testing.TB) string {
	cacheOnce.Do(func() {
		d, err := os.MkdirTemp("", "wasmlet-plugin-cache-")
		if err != nil {
			tb.Fatal(err)
		}
		cacheDir = d
	})
	return cacheDir
}

// TestMain removes the shared temporary directories after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
	if goGuestPath != "" {
		os.RemoveAll(filepath.Dir(goGuestPath))
	}
	os.Exit(code)
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// load loads path with cfg and closes the plugin when the test ends.
func load(tb testing.TB, path string, cfg Config) *Plugin {
	tb.Helper()
	p, err := Load(context.Background(), LoadConfig{Path: path, Config: cfg})
	if err != nil {
		tb.Fatalf("Load(%s): %v", path, err)
	}
	tb.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// writePlugin copies wasm into dir as <name>.wasm with a manifest
// <name>.plugin.yaml (extra YAML appended) and returns the manifest path.
func writePlugin(tb testing.TB, dir, name, wasm, version, extra string) string {
	tb.Helper()
	b, err := os.ReadFile(wasm)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if err := os.WriteFile(filepath.Join(dir, name+".wasm"), b, 0o644); err != nil {
		tb.Fatal(err)
	}
	mf := "name: " + name + "\nversion: " + version + "\nabi: v1\nkinds: [admission]\nsha256: " + hex.EncodeToString(sum[:]) + "\n" + extra
	path := filepath.Join(dir, name+".plugin.yaml")
	// Write the manifest via rename so a watcher never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(mf), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// eventually polls cond until it holds or d passes.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
