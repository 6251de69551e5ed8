package pluginoci

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
)

const (
	manifestSuffix = abi.ManifestSuffix
	// TestsDir is the directory, beside the manifest, of the test fixtures.
	TestsDir = "tests"
)

// checkName refuses anything but a plain file name: the name becomes a path
// under the directory a pull writes to.
func checkName(n string) error {
	switch {
	case n == "":
		return fmt.Errorf("%w: empty file name", ErrUnsafeName)
	case strings.ContainsAny(n, `/\`):
		return fmt.Errorf("%w %q: a path separator", ErrUnsafeName, n)
	case strings.Contains(n, ".."):
		return fmt.Errorf("%w %q: contains ..", ErrUnsafeName, n)
	case strings.HasPrefix(n, "."):
		return fmt.Errorf("%w %q: a leading dot", ErrUnsafeName, n)
	case len(n) > 255:
		return fmt.Errorf("%w: a name of %d bytes", ErrUnsafeName, len(n))
	}
	for _, r := range n {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w %q: a control character", ErrUnsafeName, n)
		}
	}
	return nil
}

// ReadPlugin reads a plugin from disk. path is a manifest (*.plugin.yaml) or
// a directory holding exactly one. The module is the file the manifest names
// (wasm:, default <name>.wasm), beside it; the tests are the regular files
// tests/*.yaml beside the manifest, or in testsDir when it is not empty.
// The manifest must be one the agent loads: valid, its sha256 the module's.
func ReadPlugin(path, testsDir string) (*Plugin, error) {
	manifestPath, err := findManifest(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(manifestPath)
	p := &Plugin{Manifest: File{Name: filepath.Base(manifestPath)}}
	if p.Manifest.Data, err = os.ReadFile(manifestPath); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPlugin, err)
	}
	m, err := parseManifest(p.Manifest)
	if err != nil {
		return nil, err
	}
	p.Module.Name = moduleName(m)
	if p.Module.Data, err = os.ReadFile(filepath.Join(dir, p.Module.Name)); err != nil {
		return nil, fmt.Errorf("%w: module: %v", ErrPlugin, err)
	}
	if testsDir == "" {
		testsDir = filepath.Join(dir, TestsDir)
	}
	files, err := filepath.Glob(filepath.Join(testsDir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPlugin, err)
	}
	sort.Strings(files)
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: test %v", ErrPlugin, err)
		}
		p.Tests = append(p.Tests, File{Name: filepath.Base(f), Data: b})
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrPlugin, manifestPath, err)
	}
	return p, nil
}

// findManifest returns path if it is a manifest, else the one manifest of
// the directory path.
func findManifest(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrPlugin, err)
	}
	if !fi.IsDir() {
		if !strings.HasSuffix(path, manifestSuffix) {
			return "", fmt.Errorf("%w: %s is not a plugin manifest (*%s) nor a directory", ErrPlugin, path, manifestSuffix)
		}
		return path, nil
	}
	found, err := filepath.Glob(filepath.Join(path, "*"+manifestSuffix))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrPlugin, err)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: %s holds no plugin manifest (*%s)", ErrPlugin, path, manifestSuffix)
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	return "", fmt.Errorf("%w: %s holds %d plugin manifests; name one: %s", ErrPlugin, path, len(found), strings.Join(found, ", "))
}

// parseManifest reads a manifest file with the host's rules.
func parseManifest(f File) (*abi.Manifest, error) {
	var m abi.Manifest
	if err := yaml.UnmarshalStrict(f.Data, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", f.Name, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", f.Name, err)
	}
	return &m, nil
}

// moduleName is the module file a manifest names.
func moduleName(m *abi.Manifest) string {
	if m.Wasm != "" {
		return m.Wasm
	}
	return m.Name + ".wasm"
}

// check holds a plugin to what the agent loads from a directory: a valid
// manifest naming the module beside it by a plain file name, whose sha256
// is the module's, which is WebAssembly.
func (p *Plugin) check() error {
	m, err := parseManifest(p.Manifest)
	if err != nil {
		return err
	}
	if m.Reference() {
		return fmt.Errorf("manifest %s names image %s: an artifact carries a plugin's own manifest, not a reference to another", p.Manifest.Name, m.Image)
	}
	if err := checkName(m.Wasm); m.Wasm != "" && err != nil {
		return fmt.Errorf("manifest %s: wasm %q must be a file name beside the manifest: %w", p.Manifest.Name, m.Wasm, err)
	}
	if want := moduleName(m); p.Module.Name != want {
		return fmt.Errorf("manifest %s names module %s, the module is %s", p.Manifest.Name, want, p.Module.Name)
	}
	if !strings.HasPrefix(string(p.Module.Data), "\x00asm") {
		return fmt.Errorf("module %s is not WebAssembly (no \\0asm header)", p.Module.Name)
	}
	sum := sha256.Sum256(p.Module.Data)
	if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, m.SHA256) {
		return fmt.Errorf("module %s has sha256 %s, manifest %s says %q", p.Module.Name, got, p.Manifest.Name, m.SHA256)
	}
	for _, f := range append([]File{p.Module, p.Manifest}, p.Tests...) {
		if err := checkName(f.Name); err != nil {
			return err
		}
	}
	return nil
}

// WriteDir writes the plugin's files into dir: <module>.wasm,
// <name>.plugin.yaml and tests/*.yaml. Everything is written into a
// temporary directory beside dir first; then, when dir does not exist, that
// directory is renamed to dir, else each file is renamed into dir — the
// module and tests first and the manifest last, so that an agent watching
// dir sees the new manifest only once its module is in place. Files of the
// same names are replaced; other files of dir are left alone. Nothing is
// written into dir when writing the temporary directory fails.
func (p *Plugin) WriteDir(dir string) (err error) {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".pull-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	write := func(path string, b []byte) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	// In order of installation: module, tests, manifest.
	var order []string
	if err := write(filepath.Join(tmp, p.Module.Name), p.Module.Data); err != nil {
		return err
	}
	order = append(order, p.Module.Name)
	if len(p.Tests) > 0 {
		if err := os.Mkdir(filepath.Join(tmp, TestsDir), 0o755); err != nil {
			return err
		}
		for _, t := range p.Tests {
			rel := filepath.Join(TestsDir, t.Name)
			if err := write(filepath.Join(tmp, rel), t.Data); err != nil {
				return err
			}
			order = append(order, rel)
		}
	}
	if err := write(filepath.Join(tmp, p.Manifest.Name), p.Manifest.Data); err != nil {
		return err
	}
	order = append(order, p.Manifest.Name)

	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.Chmod(tmp, 0o755); err != nil {
			return err
		}
		return os.Rename(tmp, dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	if len(p.Tests) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, TestsDir), 0o755); err != nil {
			return err
		}
	}
	for _, rel := range order {
		if err := os.Rename(filepath.Join(tmp, rel), filepath.Join(dir, rel)); err != nil {
			return err
		}
	}
	return os.RemoveAll(tmp)
}
