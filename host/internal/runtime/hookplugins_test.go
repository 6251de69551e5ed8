package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/extension"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// hookPlugins is an Extension over a plugin directory holding the answer
// fixture once per manifest given (name → manifest YAML after the fields
// every manifest has).
func hookPlugins(t *testing.T, manifests map[string]string) *extension.Extension {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "extension", "testdata", "answer.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	for name, extra := range manifests {
		if err := os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644); err != nil {
			t.Fatal(err)
		}
		mf := "name: " + name + "\nversion: 1.0.0\nabi: v1\nkinds: [hook]\nsha256: " + hex.EncodeToString(sum[:]) + "\n" + extra
		if err := os.WriteFile(filepath.Join(dir, name+".plugin.yaml"), []byte(mf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	m, err := pluginhost.NewManager(pluginhost.Config{Dir: dir, Registerer: reg, Timeout: time.Minute, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	m.Scan(context.Background())
	e, err := extension.New(extension.Config{Manager: m, NodeName: "node1", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Hook plugins through the extension and the runtime into the CRI config:
// a declared adjustment reaches the created container; a validator's
// refusal and a conflict keep it from being created.
func TestManager_SyncPod_HookPlugins(t *testing.T) {
	adjuster := "points: [PreCreate]\npermissions:\n  adjust: [annotations, resources, oomScoreAdj]\nconfig:\n" +
		`  PreCreate: '{"adjustment":{"annotations":{"hooked":"yes"},"resources":{"memoryLimitBytes":67108864,"cpuQuota":20000},"oomScoreAdj":321}}'` + "\n"
	tests := []struct {
		name      string
		manifests map[string]string
		reason    error  // nil: the container is created
		message   string // in the failed step's message
	}{
		{name: "declared adjustment", manifests: map[string]string{"adjuster": adjuster}},
		{name: "validator refuses", manifests: map[string]string{"adjuster": adjuster,
			"validator": "points: [Validate]\nconfig:\n  Validate: '{\"refuse\":\"memory limits are set by the platform\"}'\n"},
			reason: container.ErrCreateContainerConfig, message: "hook plugin validator refused the container: memory limits are set by the platform"},
		{name: "conflict", manifests: map[string]string{"adjuster": adjuster + "order: 1\n",
			"other": "order: 2\npermissions:\n  adjust: [oomScoreAdj]\nfailurePolicy: Ignore\nconfig:\n  PreCreate: '{\"adjustment\":{\"oomScoreAdj\":-100}}'\n"},
			reason: container.ErrPreCreateHook, message: "hook plugins adjuster and other conflict: both set oomScoreAdj"},
		{name: "undeclared", manifests: map[string]string{"adjuster": strings.Replace(adjuster, "adjust: [annotations, resources, oomScoreAdj]", "adjust: [annotations]", 1)},
			reason: container.ErrPreCreateHook, message: `hook plugin adjuster, pod default/web-hp: adjustment field "resources" is not declared`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, f := newTestManager(t)
			m.cfg.Hooks = hookPlugins(t, tt.manifests)
			_, r := syncOnce(t, m, testPod("hp", v1.RestartPolicyAlways, "a"), NewBackOff())
			f.RuntimeService.Lock()
			defer f.RuntimeService.Unlock()
			if tt.reason != nil {
				var step *container.StepResult
				for i := range r.Steps {
					if r.Steps[i].Err != nil {
						step = &r.Steps[i]
					}
				}
				if step == nil || !errors.Is(step.Err, tt.reason) || !strings.Contains(step.Message, tt.message) {
					t.Fatalf("steps %+v, want %v with %q", r.Steps, tt.reason, tt.message)
				}
				if n := len(f.RuntimeService.Containers); n != 0 {
					t.Errorf("%d containers created", n)
				}
				return
			}
			if r.Error() != nil {
				t.Fatal(r.Error())
			}
			if len(f.RuntimeService.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(f.RuntimeService.Containers))
			}
			for _, c := range f.RuntimeService.Containers {
				res := c.LinuxResources
				if c.Annotations["hooked"] != "yes" || res.GetMemoryLimitInBytes() != 64<<20 || res.GetCpuQuota() != 20000 || res.GetOomScoreAdj() != 321 {
					t.Errorf("created container: annotations %v, resources %v", c.Annotations, res)
				}
			}
		})
	}
}
