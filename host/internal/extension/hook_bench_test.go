package extension

import (
	"context"
	"testing"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// BenchmarkExtension_Hook is one hook call at PreCreate through the
// extension (encode, call, decode, permission check, merge, translate):
// the answer fixture returning nothing, env only, and the new fields
// (mounts, devices, resources, OOM score, a removal) under the
// permissions that allow them.
func BenchmarkExtension_Hook(b *testing.B) {
	full := `{"adjustment":{"env":[{"name":"A","value":"1"}],` +
		`"mounts":[{"hostPath":"/srv/shared","containerPath":"/shared","readOnly":true}],` +
		`"devices":[{"hostPath":"/dev/fuse"}],"resources":{"memoryLimitBytes":67108864,"cpuShares":512},` +
		`"oomScoreAdj":100,"remove":{"env":["DEBUG"]}}}`
	for _, bc := range []struct{ name, response, extra string }{
		{"none", `{}`, ""},
		{"env", `{"adjustment":{"env":[{"name":"A","value":"1"}]}}`, ""},
		{"mounts-devices-resources", full,
			"permissions:\n  adjust: [env, mounts, devices, resources, oomScoreAdj, remove]\n  hostPaths: [/srv/shared, /dev/fuse]\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			answering(b, dir, "answer", bc.response, bc.extra)
			e, _ := setup(b, dir, nil)
			pod := testPod("p")
			c := &pod.Spec.Containers[0]
			ctx := context.Background()
			if _, err := e.Hook(ctx, container.HookPreCreate, pod, c); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := e.Hook(ctx, container.HookPreCreate, pod, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
