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
