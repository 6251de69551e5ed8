package shipped

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/internal/metertest"
	"github.com/wasmlet/wasmlet/plugintest"
)

// BenchmarkHookPreCreate is one PreCreate call of the Go device-injector
// (plugins/device-injector) on testdata/pod4k.json's first container,
// through the real host (default deadline mode, cpu-ns/op of the calling
// thread):
//
//   - none: the pod as it is, no device annotation: the hook decodes the
//     request and answers {} (the cost of a hook that adjusts nothing);
//
//   - adjust: the pod with a devices.nri.io and a mounts.nri.io annotation
//     for the container: the hook parses them (YAML) and answers an
//     adjustment of two devices and a mount.
//
//     go test -run '^$' -bench HookPreCreate -benchtime 2000x ./plugintest/shipped/
func BenchmarkHookPreCreate(b *testing.B) {
	pod, err := os.ReadFile(filepath.Join(repoRoot(b), "testdata", "pod4k.json"))
	if err != nil {
		b.Fatal(err)
	}
	annotated, err := annotate(pod, map[string]string{
		"devices.nri.io/container.checkout": "- path: /dev/fuse\n- path: /dev/gpu0\n  hostPath: /dev/nvidia0\n  permissions: rw\n",
		"mounts.nri.io/container.checkout":  "- source: /srv/models\n  destination: /models\n  options: [ro]\n",
	})
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := plugintest.BuildGo(filepath.Join(repoRoot(b), "plugins", "device-injector"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := plugintest.TryLoad(plugin.LoadConfig{Path: wasm, Config: plugin.Config{PoolSize: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pod  []byte
		want string // the response's adjustment fields
	}{
		{"none", pod, ""},
		{"adjust", annotated, "mounts,devices"},
	} {
		req, err := json.Marshal(abi.HookRequest{Point: abi.HookPreCreate, Pod: tc.pod, Container: firstContainer(b, tc.pod)})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			metertest.Loop(b, func() error {
				out, err := p.Call(ctx, abi.KindHook, req)
				if err != nil {
					return err
				}
				var resp abi.HookResponse
				if err := json.Unmarshal(out, &resp); err != nil || resp.Error != "" || fieldsOf(resp.Adjustment) != tc.want {
					b.Fatalf("%s: response %s (%v)", tc.name, out, err)
				}
				return nil
			})
		})
	}
}

// annotate returns pod (v1.Pod JSON) with annotations added.
func annotate(pod []byte, annotations map[string]string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(pod, &obj); err != nil {
		return nil, err
	}
	meta := obj["metadata"].(map[string]any)
	all, _ := meta["annotations"].(map[string]any)
	if all == nil {
		all = map[string]any{}
	}
	for k, v := range annotations {
		all[k] = v
	}
	meta["annotations"] = all
	return json.Marshal(obj)
}

// firstContainer returns the first app container of pod as JSON.
func firstContainer(b *testing.B, pod []byte) json.RawMessage {
	var obj struct {
		Spec struct {
			Containers []json.RawMessage `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(pod, &obj); err != nil || len(obj.Spec.Containers) == 0 {
		b.Fatalf("pod: %v", err)
	}
	return obj.Spec.Containers[0]
}

// fieldsOf names the fields a sets, comma-separated.
func fieldsOf(a *abi.Adjustment) string {
	s := ""
	for i, f := range a.Fields() {
		if i > 0 {
			s += ","
		}
		s += string(f)
	}
	return s
}
