package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

func init() {
	register("plugin", command{
		summary: "plugin tools: plugin inspect FILE.wasm | plugin test [--wasm FILE.wasm] DIR | plugin push DIR REF | plugin pull REF DIR | plugin sign --key K REF | plugin verify --key P REF",
		run:     runPlugin,
	})
}

func runPlugin(args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, `usage:
  wasmlet plugin inspect FILE.wasm|FILE.plugin.yaml
      ABI version, kinds, exports, imports, size and sha256 of a module,
      and whether wasmlet's host loads it.
  wasmlet plugin test [--wasm FILE.wasm] DIR
      run the admission cases DIR/tests/*.yaml against the plugin whose
      manifest template is DIR/plugin.yaml (or, in a plugin directory such
      as plugin pull writes, DIR/NAME.plugin.yaml); one PASS/FAIL line per
      case, exit status 1 if any case fails.
  wasmlet plugin push [--tests DIR] [--author NAME] [--registry-config FILE]
                      [--registry-ca FILE] DIR|FILE.plugin.yaml REF
      put the plugin (its manifest, the module it names, tests/*.yaml)
      into a registry as one Wasm OCI artifact; DIR holds one manifest.
  wasmlet plugin pull [--registry-config FILE] [--registry-ca FILE] REF DIR
      bring a pushed plugin back into DIR, the same files byte for byte.
  wasmlet plugin sign --key cosign.key [--password-file FILE]
                      [--registry-config FILE] [--registry-ca FILE] REF
      sign the artifact REF (a tag is resolved to its digest) as
      cosign sign --key does: the signature goes to the tag sha256-HEX.sig
      beside it, where cosign verify finds it. The key's password comes
      from $COSIGN_PASSWORD or the first line of --password-file.
  wasmlet plugin verify [--key cosign.pub] [--certificate-identity ID
                        --certificate-oidc-issuer URL --trusted-root FILE]
                        [--registry-config FILE] [--registry-ca FILE] REF
      check that one of REF's cosign signatures is over its digest and
      verifies against the key, or (keyless) carries a Fulcio certificate
      for that identity chaining to the trusted root (a Sigstore
      trusted_root.json) with a Rekor entry signed by one of its logs.
      Prints the digest verified; exit status 1 if none passes.
  Credentials come from ~/.docker/config.json or --registry-config; plain
  HTTP is used only for registries on loopback.`)
		return exitError
	}
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "inspect":
		if len(args) != 2 {
			return usage()
		}
		if err := inspect(args[1], stdout); err != nil {
			fmt.Fprintf(stderr, "wasmlet plugin inspect: %v\n", err)
			return exitError
		}
		return 0
	case "test":
		return pluginTest(args[1:], stdout, stderr)
	case "push":
		return pluginPush(args[1:], stdout, stderr)
	case "pull":
		return pluginPull(args[1:], stdout, stderr)
	case "sign":
		return pluginSign(args[1:], stdout, stderr)
	case "verify":
		return pluginVerify(args[1:], stdout, stderr)
	}
	return usage()
}

// inspect prints what a module is made of. It reads the module with wazero's
// interpreter (quick: nothing is compiled to machine code) so even a module
// wasmlet refuses can be inspected, then tries the real load.
func inspect(path string, w io.Writer) error {
	if mf := manifestBeside(path); mf != "" {
		path = mf // the manifest the agent would load the module with
	}
	wasmPath := path
	var manifest *abi.Manifest
	if strings.HasSuffix(path, abi.ManifestSuffix) {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", path, err)
		}
		manifest = &abi.Manifest{}
		if err := yaml.Unmarshal(b, manifest); err != nil {
			return fmt.Errorf("manifest %s: %w", path, err)
		}
		wasmPath = manifest.Wasm
		if wasmPath == "" {
			wasmPath = manifest.Name + ".wasm"
		}
		if !filepath.IsAbs(wasmPath) {
			wasmPath = filepath.Join(filepath.Dir(path), wasmPath)
		}
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return fmt.Errorf("plugin file: %w", err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	mod, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("plugin file %s: not a valid WebAssembly module: %w", wasmPath, err)
	}
	exports := mod.ExportedFunctions()
	sum := sha256.Sum256(wasm)

	fmt.Fprintf(w, "file:     %s\n", wasmPath)
	fmt.Fprintf(w, "size:     %d bytes\n", len(wasm))
	fmt.Fprintf(w, "sha256:   %s\n", hex.EncodeToString(sum[:]))
	if manifest != nil {
		fmt.Fprintf(w, "manifest: %s (name %s, version %s, abi %s, kinds %v)\n", path, manifest.Name, manifest.Version, manifest.ABI, manifest.Kinds)
	}
	fmt.Fprintf(w, "abi:      %s\n", abiOf(exports, wasm))
	var kinds, undeclared []string
	for _, k := range abi.Kinds {
		if _, ok := exports[abi.ExportForKind(k)]; !ok {
			continue
		}
		if manifest == nil || manifest.HasKind(k) {
			kinds = append(kinds, string(k))
		} else {
			undeclared = append(undeclared, string(k))
		}
	}
	if manifest == nil {
		fmt.Fprintf(w, "kinds:    %s (by exports)\n", orNone(kinds))
	} else {
		// What the agent calls: the kinds the manifest declares.
		var declared []string
		for _, k := range manifest.Kinds {
			declared = append(declared, string(k))
		}
		fmt.Fprintf(w, "kinds:    %s (declared)\n", orNone(declared))
		if len(undeclared) > 0 {
			fmt.Fprintf(w, "          also exported, not declared, never called: %s\n", strings.Join(undeclared, ", "))
		}
	}
	fmt.Fprintln(w, "exports:")
	for _, name := range slices.Sorted(maps.Keys(exports)) {
		fmt.Fprintf(w, "  %-28s func%s\n", name, signature(exports[name]))
	}
	for name, m := range mod.ExportedMemories() {
		fmt.Fprintf(w, "  %-28s memory (min %d pages%s)\n", name, m.Min(), maxPages(m))
	}
	fmt.Fprintln(w, "imports:")
	seen := map[string]bool{}
	for _, f := range mod.ImportedFunctions() {
		module, name, _ := f.Import()
		if seen[module+"."+name] {
			continue // a module may import one function under two indexes
		}
		seen[module+"."+name] = true
		fmt.Fprintf(w, "  %-28s func%s\n", module+"."+name, signature(f))
	}

	lc := plugin.LoadConfig{Path: path, Config: plugin.Config{CacheDir: toolCacheDir()}}
	start := time.Now()
	p, err := plugin.Load(ctx, lc)
	if err != nil {
		fmt.Fprintf(w, "load:     FAILED: %v\n", err)
		return nil
	}
	defer p.Close(ctx)
	fmt.Fprintf(w, "load:     ok in %s (deadline mode %s)\n", time.Since(start).Round(time.Millisecond), p.DeadlineMode())
	return nil
}

// manifestBeside returns the manifest beside a .wasm by the plugin
// directory's convention (<stem>.plugin.yaml), when path is a .wasm and
// that file exists; else "".
func manifestBeside(path string) string {
	if !strings.HasSuffix(path, ".wasm") {
		return ""
	}
	mf := strings.TrimSuffix(path, ".wasm") + abi.ManifestSuffix
	if fi, err := os.Stat(mf); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return mf
}

// abiOf names the ABI a module's exports and imports declare.
func abiOf(exports map[string]api.FunctionDefinition, wasm []byte) string {
	var markers []string
	for name := range exports {
		if strings.HasPrefix(name, abi.ExportVersionPrefix) {
			markers = append(markers, name)
		}
	}
	sort.Strings(markers)
	switch {
	case len(markers) > 0 && markers[0] == abi.ExportVersionV1:
		return string(abi.V1) + " (marker " + abi.ExportVersionV1 + ")"
	case len(markers) > 0:
		return "unknown (markers " + strings.Join(markers, ", ") + "; this wasmlet speaks " + string(abi.V1) + ")"
	case strings.Contains(string(wasm), "extism:host/env"):
		return string(abi.Extism) + " (imports extism:host/env)"
	}
	return "none (no " + abi.ExportVersionV1 + " export: not a wasmlet plugin)"
}

func signature(f api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	sig := "(" + names(f.ParamTypes()) + ")"
	if r := f.ResultTypes(); len(r) > 0 {
		sig += " -> " + names(r)
	}
	return sig
}

func maxPages(m api.MemoryDefinition) string {
	if max, ok := m.Max(); ok {
		return fmt.Sprintf(", max %d", max)
	}
	return ""
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// pluginTest is `wasmlet plugin test`.
func pluginTest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wasmFlag := fs.String("wasm", "", "the module (default DIR/NAME.wasm, NAME from DIR/plugin.yaml)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitError
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: wasmlet plugin test [--wasm FILE.wasm] DIR")
		return exitError
	}
	dir := pos[0]
	fail := func(err error) int {
		fmt.Fprintf(stderr, "wasmlet plugin test: %v\n", err)
		return exitError
	}
	m, mpath, err := testManifest(dir)
	if err != nil {
		return fail(err)
	}
	if !m.HasKind(abi.KindAdmission) && !m.HasKind(abi.KindHook) {
		return fail(fmt.Errorf("%s: kinds %v: only admission and hook plugins have test cases", mpath, m.Kinds))
	}
	cases, err := fixture.ReadCases(dir)
	if err != nil {
		return fail(err)
	}
	wasm := *wasmFlag
	switch {
	case wasm != "":
	case m.Wasm != "" && filepath.IsAbs(m.Wasm):
		wasm = m.Wasm
	case m.Wasm != "":
		wasm = filepath.Join(dir, m.Wasm)
	default:
		wasm = filepath.Join(dir, m.Name+".wasm")
	}
	manifestPath, cleanup, err := completeManifest(mpath, m, wasm)
	if err != nil {
		return fail(err)
	}
	defer cleanup()

	ctx := context.Background()
	failed := 0
	for _, c := range cases {
		start := time.Now()
		err := runCase(ctx, manifestPath, m, &c)
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL  %s (%s): %v\n", c.Name, took, err)
			continue
		}
		fmt.Fprintf(stdout, "PASS  %s (%s)  %s\n", c.Name, took, c.Description)
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "FAIL  %s: %d of %d cases failed\n", m.Name, failed, len(cases))
		return 1
	}
	fmt.Fprintf(stdout, "ok    %s: %d cases passed\n", m.Name, len(cases))
	return 0
}

// testManifest reads the manifest of the plugin in dir: the template
// DIR/plugin.yaml of a plugin's source tree, else the one
// DIR/<name>.plugin.yaml of a plugin directory (what `wasmlet plugin pull`
// writes). It returns the manifest and the file it came from.
func testManifest(dir string) (abi.Manifest, string, error) {
	template := filepath.Join(dir, fixture.ManifestFile)
	if _, err := os.Stat(template); err == nil {
		m, err := fixture.ReadManifest(dir)
		return m, template, err
	}
	found, err := filepath.Glob(filepath.Join(dir, "*"+abi.ManifestSuffix))
	if err != nil {
		return abi.Manifest{}, "", err
	}
	if len(found) != 1 {
		return abi.Manifest{}, "", fmt.Errorf("%s: want the template %s or exactly one *%s, found %d", dir, fixture.ManifestFile, abi.ManifestSuffix, len(found))
	}
	var m abi.Manifest
	b, err := os.ReadFile(found[0])
	if err == nil {
		err = yaml.UnmarshalStrict(b, &m)
	}
	if err != nil {
		return m, found[0], fmt.Errorf("manifest %s: %w", found[0], err)
	}
	return m, found[0], nil
}

// completeManifest writes the template with the module's path and sha256
// into a temporary directory, so the plugin loads with its own permissions,
// timeout and failure policy, as the agent would load it.
func completeManifest(manifest string, m abi.Manifest, wasm string) (string, func(), error) {
	abs, err := filepath.Abs(wasm)
	if err != nil {
		return "", nil, err
	}
	b, err := os.ReadFile(abs)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("plugin file %s does not exist: build it (make plugins) and pass --wasm build/plugins/%s.wasm", wasm, m.Name)
	}
	if err != nil {
		return "", nil, fmt.Errorf("plugin file: %w", err)
	}
	sum := sha256.Sum256(b)
	m.Wasm, m.SHA256 = abs, hex.EncodeToString(sum[:])
	if err := m.Validate(); err != nil {
		return "", nil, fmt.Errorf("manifest %s: %w", manifest, err)
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp("", "wasmlet-plugin-test-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(tmp, m.Name+abi.ManifestSuffix)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(tmp) }, nil
}

// runCase loads the plugin with the case's config and checks its verdict
// (an admission case) or its outcome against the case and the manifest m
// (a hook case). Each case gets a fresh plugin: no state leaks from one
// case to the next.
func runCase(ctx context.Context, manifestPath string, m abi.Manifest, c *fixture.Case) error {
	want := abi.KindAdmission
	if c.IsHook() {
		want = abi.KindHook
	}
	if !m.HasKind(want) {
		return fmt.Errorf("a %s case, and the manifest's kinds are %v", want, m.Kinds)
	}
	p, err := plugin.Load(ctx, plugin.LoadConfig{
		Path:         manifestPath,
		PluginConfig: c.Config,
		Config:       plugin.Config{CacheDir: toolCacheDir(), PoolSize: 1},
	})
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	if c.IsHook() {
		req, err := c.HookRequest()
		if err != nil {
			return err
		}
		resp, err := p.Hook(ctx, &req)
		if resp == nil {
			return err
		}
		return c.CheckHook(m, *resp)
	}
	req := c.Request()
	resp, err := p.Admit(ctx, &req)
	if err != nil {
		return err
	}
	return c.Check(*resp)
}
