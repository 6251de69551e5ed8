package main

import (
	"path/filepath"
	"strings"
	"testing"
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
