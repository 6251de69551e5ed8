package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

const privilegedPod = `apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: monitoring}
spec:
  containers:
  - name: agent
    image: example.com/agent:1
    securityContext: {privileged: true}
`

func TestRunAdmit(t *testing.T) {
	plugins := builtPlugins(t)
	tmp := t.TempDir()
	priv := writeTestFile(t, tmp, "priv.yaml", privilegedPod)
	badType := writeTestFile(t, tmp, "bad.yaml", "metadata: {name: x}\nspec: {containers: 5}\n")
	notObject := writeTestFile(t, tmp, "list.yaml", "- a\n- b\n")
	for _, name := range []string{"deny-privileged", "deny-privileged-c"} {
		wasm := filepath.Join(plugins, name+".wasm")
		manifest := filepath.Join(plugins, name+".plugin.yaml")
		tests := []struct {
			name       string
			args       []string
			wantCode   int
			wantOut    string // substring of stdout
			wantStderr string // substring of stderr
		}{
			{"denied", []string{"--plugin", wasm, priv}, exitDenied, "reason:  Privileged", ""},
			{"allowed pod4k", []string{"--plugin", manifest, "../../testdata/pod4k.json"}, exitAllowed, "ALLOWED", ""},
			{"config exempts the namespace", []string{priv, "--plugin", wasm, "--config", "allowNamespaces=kube-system,monitoring"}, exitAllowed, "ALLOWED", ""},
			{"missing pod file", []string{"--plugin", wasm, filepath.Join(tmp, "nope.yaml")}, exitError, "", "nope.yaml"},
			{"pod of the wrong shape", []string{"--plugin", wasm, badType}, exitError, "", "bad.yaml"},
			{"pod not an object", []string{"--plugin", wasm, notObject}, exitError, "", "list.yaml: not an object"},
			{"missing plugin", []string{"--plugin", filepath.Join(tmp, "nope.wasm"), priv}, exitError, "", "nope.wasm"},
			{"bad config flag", []string{"--plugin", wasm, "--config", "novalue", priv}, exitError, "", "KEY=VALUE"},
			{"no pod", []string{"--plugin", wasm}, exitError, "", "usage"},
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				code, out, errOut := runCmd(admitCmd, tt.args...)
				if code != tt.wantCode || !strings.Contains(out, tt.wantOut) || !strings.Contains(errOut, tt.wantStderr) {
					t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
				}
			})
		}
	}
}

// readBuilt reads the module and the manifest of the built plugin name.
func readBuilt(t *testing.T, plugins, name string) (wasm, manifest []byte) {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(plugins, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if manifest, err = os.ReadFile(filepath.Join(plugins, name+abi.ManifestSuffix)); err != nil {
		t.Fatal(err)
	}
	return wasm, manifest
}

// TestRunAdmit_manifestBeside: a .wasm with a manifest beside it is judged
// with that manifest's config, as the agent would judge it; without one,
// admit says that none is used.
func TestRunAdmit_manifestBeside(t *testing.T) {
	plugins := builtPlugins(t)
	dir := t.TempDir()
	priv := writeTestFile(t, dir, "priv.yaml", privilegedPod)
	wasm, mf := readBuilt(t, plugins, "deny-privileged")
	// The manifest exempts the pod's namespace.
	mf = []byte(strings.Replace(string(mf), "allowNamespaces: kube-system", "allowNamespaces: monitoring", 1))
	writeTestFile(t, dir, "deny-privileged.wasm", string(wasm))
	writeTestFile(t, dir, "deny-privileged.plugin.yaml", string(mf))
	code, out, errOut := runCmd(admitCmd, "--plugin", filepath.Join(dir, "deny-privileged.wasm"), priv)
	if code != exitAllowed || !strings.Contains(errOut, "using the manifest beside the module") {
		t.Fatalf("with the manifest beside: exit %d, want %d (its config exempts monitoring)\nstdout: %s\nstderr: %s", code, exitAllowed, out, errOut)
	}
	bare := t.TempDir()
	writeTestFile(t, bare, "deny-privileged.wasm", string(wasm))
	code, out, errOut = runCmd(admitCmd, "--plugin", filepath.Join(bare, "deny-privileged.wasm"), priv)
	if code != exitDenied || !strings.Contains(errOut, "no manifest beside") {
		t.Fatalf("bare module: exit %d, want %d and a note that no manifest is used\nstdout: %s\nstderr: %s", code, exitDenied, out, errOut)
	}
}

// TestRunAdmit_mode: the verdict names the plugin's mode; a plugin in mode
// monitor that denies exits as an admit and says what it would have
// decided and why, as the agent would admit the pod and report the denial.
func TestRunAdmit_mode(t *testing.T) {
	plugins := builtPlugins(t)
	dir := t.TempDir()
	priv := writeTestFile(t, dir, "priv.yaml", privilegedPod)
	wasm, mf := readBuilt(t, plugins, "deny-privileged")
	writeTestFile(t, dir, "deny-privileged.wasm", string(wasm))
	enforce := writeTestFile(t, dir, "deny-privileged.plugin.yaml", string(mf))
	monitor := writeTestFile(t, dir, "watch.plugin.yaml", string(mf)+"mode: monitor\n")
	tests := []struct {
		name     string
		plugin   string
		pod      string
		wantCode int
		wantOut  []string
	}{
		{"enforce denies", enforce, priv, exitDenied, []string{"DENIED", "mode enforce", "reason:  Privileged"}},
		{"enforce allows", enforce, "../../testdata/pod4k.json", exitAllowed, []string{"ALLOWED", "mode enforce"}},
		{"monitor would deny", monitor, priv, exitAllowed, []string{"ALLOWED", "mode monitor: would be DENIED in mode enforce", "reason:  Privileged", "message: "}},
		{"monitor allows", monitor, "../../testdata/pod4k.json", exitAllowed, []string{"ALLOWED", "mode monitor)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(admitCmd, "--plugin", tt.plugin, tt.pod)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			for _, s := range tt.wantOut {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
		})
	}
}
