package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"sigs.k8s.io/yaml"
)

// TestManager_Scan_neverFailsOpen is a property test over random sequences
// of plugin-directory edits — add, replace (same or another version),
// rename, delete the manifest, delete the module, corrupt the pin, two files
// of the same plugin name, in any order, scanned after some edits and not
// others. Whatever the sequence, after the next scan: when the directory
// holds a valid manifest of the Fail-policy plugin, a plugin of that name
// serves (from a manifest still in the directory), so no pod it forbids is
// admitted; and the log says the enforced set.
func TestManager_Scan_neverFailsOpen(t *testing.T) {
	ok, err := os.ReadFile("testdata/wat/ok.wasm")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(ok)
	pin := hex.EncodeToString(sum[:])
	cache := filepath.Join(t.TempDir(), "cache")
	const slots = 3
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 7))
		dir := t.TempDir()
		var logs bytes.Buffer
		m, err := NewManager(Config{Dir: dir, CacheDir: cache, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
		if err != nil {
			t.Fatal(err)
		}
		in := func(name string) string { return filepath.Join(dir, name) }
		manifest := func(i int, version int, sha string) {
			mf := fmt.Sprintf("name: policy\nversion: \"%d\"\nabi: v1\nkinds: [admission]\nfailurePolicy: Fail\nwasm: f%d.wasm\nsha256: %s\n", version, i, sha)
			tmp := in(fmt.Sprintf(".f%d.tmp", i))
			if err := os.WriteFile(tmp, []byte(mf), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, in(fmt.Sprintf("f%d.plugin.yaml", i))); err != nil {
				t.Fatal(err)
			}
		}
		var steps []string
		for range 4 + rng.IntN(12) {
			i, j := rng.IntN(slots), rng.IntN(slots)
			mf, wasm := in(fmt.Sprintf("f%d.plugin.yaml", i)), in(fmt.Sprintf("f%d.wasm", i))
			switch op := rng.IntN(7); op {
			case 0, 1: // add or replace, module and manifest
				v := 1 + rng.IntN(3)
				if err := os.WriteFile(wasm, ok, 0o644); err != nil {
					t.Fatal(err)
				}
				manifest(i, v, pin)
				steps = append(steps, fmt.Sprintf("write f%d v%d", i, v))
			case 2: // a manifest whose pin does not match
				manifest(i, 9, strings.Repeat("0", 64))
				steps = append(steps, fmt.Sprintf("corrupt f%d", i))
			case 3:
				os.Remove(mf)
				steps = append(steps, fmt.Sprintf("rm f%d.plugin.yaml", i))
			case 4:
				os.Remove(wasm)
				steps = append(steps, fmt.Sprintf("rm f%d.wasm", i))
			case 5: // rename the manifest (it still names f<i>.wasm)
				if _, err := os.Stat(mf); err == nil && i != j {
					os.Rename(mf, in(fmt.Sprintf("f%d.plugin.yaml", j)))
					steps = append(steps, fmt.Sprintf("mv f%d.plugin.yaml f%d.plugin.yaml", i, j))
				}
			case 6:
				m.Scan(context.Background())
				steps = append(steps, "scan")
			}
		}
		m.Scan(context.Background())
		valid := validManifests(t, dir, ok)
		served := m.Get("policy")
		if len(valid) > 0 {
			var from string
			for _, info := range m.Plugins() {
				if info.State == StateLoaded && info.Name == "policy" {
					from = info.Path
				}
			}
			_, statErr := os.Stat(from)
			if served == nil || statErr != nil {
				t.Fatalf("seed %d: valid manifests %v, serving %q (from %q); steps:\n%s\nplugins: %+v",
					seed, valid, "?", from, strings.Join(steps, "\n"), m.Plugins())
			}
			if _, err := served.Admit(context.Background(), admitReq(`{}`)); err != nil {
				t.Fatalf("seed %d: the serving plugin does not answer: %v", seed, err)
			}
		}
		if served != nil && !strings.Contains(logs.String(), "enforced now") {
			t.Fatalf("seed %d: the log never said the enforced set:\n%s", seed, logs.String())
		}
		m.Close(context.Background())
	}
}

// validManifests returns the manifests of dir that name a present module
// whose sha256 they pin.
func validManifests(t *testing.T, dir string, module []byte) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.plugin.yaml"))
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var mf struct {
			Wasm   string `json:"wasm"`
			SHA256 string `json:"sha256"`
		}
		if err := yaml.Unmarshal(b, &mf); err != nil {
			t.Fatal(err)
		}
		w, err := os.ReadFile(filepath.Join(dir, mf.Wasm))
		if err != nil {
			continue
		}
		sum := sha256.Sum256(w)
		if hex.EncodeToString(sum[:]) == mf.SHA256 && bytes.Equal(w, module) {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}
