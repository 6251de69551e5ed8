package plugintest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk/sdktest/fixture"
)

// TestFixture_ReadCase checks that package fixture (in the SDK's test
// module, without sigs.k8s.io/yaml) reads a case as sigs.k8s.io/yaml's
// UnmarshalStrict, what the host reads manifests with, does: equal values,
// or the same error.
func TestFixture_ReadCase(t *testing.T) {
	for _, in := range []string{
		"expect: {allowed: true}\npod: {metadata: {name: a}}\n",
		"description: 5\nconfig: {n: 3, f: 1.50, b: yes, s: x, big: 12345678901234567890, pi: 3.14159265358979, inf: .inf, nul: null}\nexpect: {allowed: false, reason: 404, messageContains: true}\npod: {metadata: {name: a}}\n",
		"expect: {allowed: true}\npod: {metadata: {labels: {1: a, true: b, 1.5: c, 1e3: d, -.inf: e, 3.14159265358979: f}}, spec: {priority: 7, x: [1, 2.5, no]}}\n",
		"expect: {allowed: true}\npod: &p {metadata: {name: a}}\nnode: {spec: {unschedulable: yes}}\npodsOnNode: [*p, {metadata: {name: b}}]\n",
		"Expect: {Allowed: true}\nPOD: {metadata: {name: a}}\nConfig: {k: 1}\n",
		"expect: {allowed: true}\npod: {metadata: {name: a}}\nexpect: {allowed: false}\n",
		"expect: {allowed: true}\npod: {}\ntypo: 1\n",
		"expect: {allowed: \"true\"}\npod: {}\n",
		"expect: {allowed: true}\npod: {}\nconfig: {x: [1, 2]}\n",
		"expect: {allowed: true}\npod: {}\nconfig: {[1]: x}\n",
		"expect: {allowed: true}\npod: [unclosed\n",
		"- a\n- b\n",
	} {
		file := filepath.Join(t.TempDir(), "case.yaml")
		if err := os.WriteFile(file, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := fixture.ReadCase(file)
		var want fixture.Case
		if werr := yaml.UnmarshalStrict([]byte(in), &want); werr != nil {
			if werr := fmt.Errorf("test case %s: %w", file, werr); err == nil || err.Error() != werr.Error() {
				t.Errorf("%q: error %v, want %v", in, err, werr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v, want %+v", in, err, want)
			continue
		}
		want.File, want.Name = got.File, got.Name
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %+v\nwant %+v", in, got, want)
		}
	}
}

// TestFixture_ReadManifest checks a manifest template the same way.
func TestFixture_ReadManifest(t *testing.T) {
	for _, in := range []string{
		"name: x\nversion: 1.10\nabi: v1\nkinds: [admission, 1]\nconfig: {a: 1, b: on}\npermissions: {timeout: 100ms, memoryPages: 10, allowedHosts: [\"a:80\", 8080]}\norder: 2\nfailurePolicy: Ignore\n",
		"Name: x\nVERSION: 2\n",
		"name: x\npermissions: {timeout: 5}\n",
		"name: x\nsha: abc\n",
		"name: x\norder: first\n",
		"",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, fixture.ManifestFile), []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := fixture.ReadManifest(dir)
		var want abi.Manifest
		if werr := yaml.UnmarshalStrict([]byte(in), &want); werr != nil {
			if werr := fmt.Errorf("manifest %s: %w", filepath.Join(dir, fixture.ManifestFile), werr); err == nil || err.Error() != werr.Error() {
				t.Errorf("%q: error %v, want %v", in, err, werr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %+v, %v\nwant %+v", in, got, err, want)
		}
	}
}
