// Package wasmbuild compiles Go plugin packages for wasip1, for tests and
// benchmarks: plugintest's Build is built on it, and the benchmarks inside
// host/ use it directly, since they must not reach the public plugin facade
// (host/plugin) that plugintest is built on.
package wasmbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// CacheDir is where built modules are kept (and where tests keep wazero's
// compilation cache): $WASMLET_SDKTEST_CACHE, else wasmlet/sdktest in the
// user cache directory.
func CacheDir() string {
	if d := os.Getenv("WASMLET_SDKTEST_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "wasmlet", "sdktest")
}

var buildMu sync.Mutex

// Go compiles the Go plugin package in dir for wasip1
// (-buildmode=c-shared), in the module that holds dir, and returns the
// .wasm's path. The output lives in CacheDir, so when nothing changed `go
// build` only checks it is up to date. A build error carries the compiler's
// output.
func Go(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	out := filepath.Join(CacheDir(), "build", hex.EncodeToString(sum[:8]), filepath.Base(abs)+".wasm")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	cmd := exec.Command(goTool(), "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", errors.New("build " + dir + " for wasip1: " + strings.TrimSpace(string(msg)))
		}
		return "", err
	}
	return out, nil
}

// goTool is the go command of the running toolchain when there is one.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
