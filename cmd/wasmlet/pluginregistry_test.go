package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

func TestRunPlugin_PushPull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of the user running the test
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600")

	src := t.TempDir()
	wasm := "\x00asm\x01\x00\x00\x00"
	sum := sha256.Sum256([]byte(wasm))
	writeTestFile(t, src, "tiny.wasm", wasm)
	writeTestFile(t, src, "tiny.plugin.yaml", "name: tiny\nversion: 0.1.0\nabi: v1\nkinds: [admission]\nsha256: "+hex.EncodeToString(sum[:])+"\n")
	writeTestFile(t, src, "tests/allow.yaml", "description: allowed\n")
	ref := u.Host + "/policies/tiny:0.1.0"

	code, out, errOut := runCmd(pluginCmd, "push", src, ref)
	if code != 0 || !strings.HasPrefix(out, "pushed "+ref+"@sha256:") {
		t.Fatalf("push: exit %d, %q %q", code, out, errOut)
	}
	// The same files and SOURCE_DATE_EPOCH: the same digest.
	if _, again, _ := runCmd(pluginCmd, "push", filepath.Join(src, "tiny.plugin.yaml"), ref); again != out {
		t.Errorf("second push %q, first %q", again, out)
	}
	dst := filepath.Join(t.TempDir(), "pulled")
	code, out, errOut = runCmd(pluginCmd, "pull", ref, dst)
	if code != 0 || !strings.Contains(out, "tiny.plugin.yaml") {
		t.Fatalf("pull: exit %d, %q %q", code, out, errOut)
	}
	for _, n := range []string{"tiny.wasm", "tiny.plugin.yaml", "tests/allow.yaml"} {
		a, _ := os.ReadFile(filepath.Join(src, n))
		b, err := os.ReadFile(filepath.Join(dst, n))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s differs: %v", n, err)
		}
	}

	code, _, errOut = runCmd(pluginCmd, "pull", u.Host+"/policies/missing:1", filepath.Join(t.TempDir(), "x"))
	if code != exitError || !strings.Contains(errOut, "policies/missing:1") {
		t.Errorf("missing: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCmd(pluginCmd, "push", src); code != exitError {
		t.Errorf("push without REF: exit %d", code)
	}
}
