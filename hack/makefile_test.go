// Package hack_test checks the Makefile's own logic.
package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakefile_testSteps runs the test target's steps with a failing unit
// test run: both e2e suites must still run, and the target must fail at the
// end naming the failed step.
func TestMakefile_testSteps(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed: %v", err)
	}
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goFails := script("go", "echo unit-ran; exit 1")
	e2e := script("e2e", "echo e2e-ran")
	e2eAPI := script("e2e-api", "echo e2e-apiserver-ran")
	cmd := exec.Command("make", "-s", "-C", "..", "test-steps", "GO="+goFails, "E2E="+e2e, "E2E_APISERVER="+e2eAPI, "MODULES=.")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("make test-steps succeeded with a failing unit test run:\n%s", out)
	}
	for _, want := range []string{"unit-ran", "e2e-ran", "e2e-apiserver-ran", "failed: unit(.)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// All steps passing: the target passes.
	goOK := script("go-ok", "echo unit-ran")
	if out, err := exec.Command("make", "-s", "-C", "..", "test-steps", "GO="+goOK, "E2E="+e2e, "E2E_APISERVER="+e2eAPI, "MODULES=.").CombinedOutput(); err != nil {
		t.Errorf("make test-steps failed with every step passing: %v\n%s", err, out)
	}
}

// TestInstallDeps_waitsForTheLock runs hack/install-deps.sh with stand-ins
// for dpkg-query (every package missing) and apt-get: apt-get must be asked
// to wait for a held dpkg lock instead of failing at once.
func TestInstallDeps_waitsForTheLock(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	for name, body := range map[string]string{
		"dpkg-query": "exit 1",
		"apt-get":    `echo "$*" >> ` + calls,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "install-deps.sh")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "APT_LOCK_TIMEOUT=42")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install-deps.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(line, "DPkg::Lock::Timeout=42") {
			t.Errorf("apt-get %s: does not wait for the lock", line)
		}
	}
	if !strings.Contains(string(b), "install -y") {
		t.Errorf("apt-get never asked to install:\n%s", b)
	}
}
