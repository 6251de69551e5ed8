package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wasmlet/wasmlet/plugintest"
)

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// builtPlugins builds the example plugins with the project's build script
// (once per test binary, incrementally across runs) and returns the output
// directory.
func builtPlugins(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir = filepath.Join(plugintest.CacheDir(), "build", "cmd-wasmlet")
		cmd := exec.Command("../../hack/build-plugins.sh", builtDir,
			"examples/plugins/deny-privileged", "examples/plugins/deny-privileged-c",
			"plugins/device-injector", "plugins/resource-adjuster", "plugins/validator")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build the example plugins: %v", buildErr)
	}
	return builtDir
}

func runCmd(f func(args []string, stdout, stderr *bytes.Buffer) int, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := f(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func admitCmd(args []string, o, e *bytes.Buffer) int  { return runAdmit(args, o, e) }
func pluginCmd(args []string, o, e *bytes.Buffer) int { return runPlugin(args, o, e) }

func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunPlugin_Inspect(t *testing.T) {
	plugins := builtPlugins(t)
	wasm := filepath.Join(plugins, "deny-privileged-c.wasm")
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	code, out, errOut := runCmd(pluginCmd, "inspect", wasm)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"sha256:   " + hex.EncodeToString(sum[:]),
		"abi:      v1",
		"kinds:    admission (declared)", // from the manifest beside it
		"wasmlet_admit                func(i32, i32) -> i64",
		"wasmlet.config_get",
		"load:     ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A valid module that is not a wasmlet plugin: described, load fails.
	empty := writeTestFile(t, t.TempDir(), "empty.wasm", "\x00asm\x01\x00\x00\x00")
	code, out, _ = runCmd(pluginCmd, "inspect", empty)
	if code != 0 || !strings.Contains(out, "abi:      none") || !strings.Contains(out, "load:     FAILED") {
		t.Errorf("empty module: exit %d\n%s", code, out)
	}
	// Not WebAssembly at all: an error naming the file.
	junk := writeTestFile(t, t.TempDir(), "junk.wasm", "not wasm")
	if code, _, errOut := runCmd(pluginCmd, "inspect", junk); code != exitError || !strings.Contains(errOut, "junk.wasm") {
		t.Errorf("junk: exit %d, stderr %s", code, errOut)
	}
}

func TestRunPlugin_Test(t *testing.T) {
	plugins := builtPlugins(t)
	for _, name := range []string{"deny-privileged", "deny-privileged-c"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("../../examples/plugins", name)
			code, out, errOut := runCmd(pluginCmd, "test", "--wasm", filepath.Join(plugins, name+".wasm"), dir)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			if n := strings.Count(out, "PASS  "); n != 7 {
				t.Errorf("%d PASS lines, want 7:\n%s", n, out)
			}
		})
	}

	// A wrong expectation fails its case, and only it.
	dir := t.TempDir()
	tmpl, err := os.ReadFile("../../examples/plugins/deny-privileged/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, dir, "plugin.yaml", string(tmpl))
	writeTestFile(t, dir, "tests/a-good.yaml", "expect: {allowed: false, reason: Privileged}\npod:\n"+indent(privilegedPod))
	writeTestFile(t, dir, "tests/b-wrong.yaml", "expect: {allowed: true}\npod:\n"+indent(privilegedPod))
	writeTestFile(t, dir, "tests/c-wrong-reason.yaml", "expect: {allowed: false, reason: HostNetwork}\npod:\n"+indent(privilegedPod))
	wasm := filepath.Join(plugins, "deny-privileged-c.wasm")
	code, out, _ := runCmd(pluginCmd, "test", "--wasm", wasm, dir)
	if code != 1 || !strings.Contains(out, "PASS  a-good") || !strings.Contains(out, "FAIL  b-wrong") ||
		!strings.Contains(out, `FAIL  c-wrong-reason`) || !strings.Contains(out, "2 of 3 cases failed") {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}

	// Setup errors are exit status 2, naming what is wrong.
	if code, _, errOut := runCmd(pluginCmd, "test", dir); code != exitError || !strings.Contains(errOut, "deny-privileged.wasm does not exist") {
		t.Errorf("no module: exit %d, stderr %s", code, errOut)
	}
	writeTestFile(t, dir, "tests/d-bad.yaml", "pod: {}\n")
	if code, _, errOut := runCmd(pluginCmd, "test", "--wasm", wasm, dir); code != exitError || !strings.Contains(errOut, "d-bad.yaml: expect.allowed is required") {
		t.Errorf("bad case: exit %d, stderr %s", code, errOut)
	}
}

// TestRunPlugin_Test_hooks runs the hook plugins' cases (tests/*.yaml with
// a hook block) and checks a wrong hook expectation, and an adjustment the
// manifest does not grant, fail their cases.
func TestRunPlugin_Test_hooks(t *testing.T) {
	plugins := builtPlugins(t)
	for _, name := range []string{"device-injector", "resource-adjuster", "validator"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("../../plugins", name)
			cases, err := filepath.Glob(filepath.Join(dir, "tests", "*.yaml"))
			if err != nil || len(cases) == 0 {
				t.Fatalf("no cases in %s: %v", dir, err)
			}
			code, out, errOut := runCmd(pluginCmd, "test", "--wasm", filepath.Join(plugins, name+".wasm"), dir)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			if n := strings.Count(out, "PASS  "); n != len(cases) {
				t.Errorf("%d PASS lines, want %d:\n%s", n, len(cases), out)
			}
		})
	}

	dir := t.TempDir()
	tmpl, err := os.ReadFile("../../plugins/device-injector/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pod := "pod:\n  metadata: {name: p, annotations: {devices.nri.io: \"- path: /dev/fuse\"}}\n  spec: {containers: [{name: c, image: i}]}\n"
	writeTestFile(t, dir, "plugin.yaml", string(tmpl))
	writeTestFile(t, dir, "tests/a-good.yaml", "hook: {point: PreCreate, container: c}\nexpect: {adjustment: {devices: [{hostPath: /dev/fuse}]}}\n"+pod)
	writeTestFile(t, dir, "tests/b-wrong.yaml", "hook: {point: PreCreate, container: c}\nexpect: {}\n"+pod)
	writeTestFile(t, dir, "tests/c-not-called.yaml", "hook: {point: PostStop, container: c}\nexpect: {}\n"+pod)
	code, out, _ := runCmd(pluginCmd, "test", "--wasm", filepath.Join(plugins, "device-injector.wasm"), dir)
	if code != 1 || !strings.Contains(out, "PASS  a-good") || !strings.Contains(out, `FAIL  b-wrong`) || !strings.Contains(out, "want none") ||
		!strings.Contains(out, "FAIL  c-not-called") || !strings.Contains(out, "do not list PostStop") {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	// The same module under a manifest that grants no devices: the case
	// fails where the host would refuse the adjustment.
	writeTestFile(t, dir, "plugin.yaml", strings.Replace(string(tmpl), "adjust: [devices, mounts, cdiDevices]", "adjust: [mounts, cdiDevices]", 1))
	code, out, _ = runCmd(pluginCmd, "test", "--wasm", filepath.Join(plugins, "device-injector.wasm"), dir)
	if code != 1 || !strings.Contains(out, "FAIL  a-good") || !strings.Contains(out, "sets devices, which the manifest's permissions.adjust does not grant") {
		t.Errorf("ungranted devices: exit %d, want 1:\n%s", code, out)
	}
}

// TestRunPlugin_Test_pluginDirectory: a plugin directory as `plugin pull`
// writes it (NAME.plugin.yaml naming its module, tests/) is tested without
// flags; a directory with two manifests is refused, naming the count.
func TestRunPlugin_Test_pluginDirectory(t *testing.T) {
	plugins := builtPlugins(t)
	dir := t.TempDir()
	tmpl, err := os.ReadFile("../../examples/plugins/deny-privileged/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(filepath.Join(plugins, "deny-privileged-c.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, dir, "module.wasm", string(wasm))
	writeTestFile(t, dir, "deny-privileged.plugin.yaml", string(tmpl)+"wasm: module.wasm\n")
	writeTestFile(t, dir, "tests/a.yaml", "expect: {allowed: false, reason: Privileged}\npod:\n"+indent(privilegedPod))
	code, out, errOut := runCmd(pluginCmd, "test", dir)
	if code != 0 || !strings.Contains(out, "PASS  a") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	writeTestFile(t, dir, "other.plugin.yaml", string(tmpl))
	if code, _, errOut := runCmd(pluginCmd, "test", dir); code != exitError || !strings.Contains(errOut, "found 2") {
		t.Errorf("two manifests: exit %d, stderr %s", code, errOut)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

// TestRunPlugin_Inspect_declaredKindsAndImports: with a manifest, inspect
// lists the kinds it declares (the only ones the agent calls) and names the
// other exported kinds apart; an import under two indexes is listed once.
func TestRunPlugin_Inspect_declaredKindsAndImports(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../host/internal/pluginhost/testdata/wat/ok.wasm") // exports all three kinds
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	wasm := writeTestFile(t, dir, "ok.wasm", string(b))
	writeTestFile(t, dir, "ok.plugin.yaml", "name: ok\nversion: 1.0.0\nabi: v1\nkinds: [admission]\nsha256: "+hex.EncodeToString(sum[:])+"\n")
	code, out, errOut := runCmd(pluginCmd, "inspect", wasm)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "kinds:    admission (declared)\n") || !strings.Contains(out, "not declared, never called: source, hook") {
		t.Errorf("kinds not as declared:\n%s", out)
	}
	code, out, errOut = runCmd(pluginCmd, "inspect", "testdata/dupimport.wasm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "wasmlet.log"); n != 1 {
		t.Errorf("wasmlet.log listed %d times, want once:\n%s", n, out)
	}
}
