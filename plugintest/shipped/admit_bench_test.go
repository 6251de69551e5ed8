package shipped

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/plugintest"
)

// The same deny-privileged policy (examples/plugins/deny-privileged) on
// testdata/pod4k.json, side by side: native Go with encoding/json into
// k8s.io/api's v1.Pod (the baseline), a Go guest decoding with encoding/json,
// the Go SDK module (and a Go SDK module that decodes every field) and the C
// module through wasmlet's plugin host. Each wasm figure is reported with its
// ratio to the baseline ("x-native-cpu"). The policy natively with the SDK's
// decoder is the example's own BenchmarkAdmit, in its module (which holds
// neither k8s.io/api nor the host).
//
//	go test -run '^$' -bench Admit -benchtime 2000x ./plugintest/shipped/

// nativeCPU is the baseline's cpu-ns/op, set by its sub-benchmark, which
// runs first; the others report their ratio to it as "x-native-cpu".
var nativeCPU float64

// The machine is shared, so besides wall time each benchmark reports the
// process's CPU time per op ("cpu-ns/op"), which load from other processes
// barely changes.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f b.N times and reports cpu-ns/op and the ratio to the
// baseline's, on CPU time: wall time on a shared machine is too noisy for a
// ratio.
func measure(b *testing.B, f func()) float64 {
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	for i := 0; i < b.N; i++ {
		f()
	}
	perOp := float64(cpuNow()-c0) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	if nativeCPU > 0 {
		b.ReportMetric(perOp/nativeCPU, "x-native-cpu")
	}
	return perOp
}

func BenchmarkAdmit(b *testing.B) {
	pod, err := os.ReadFile(filepath.Join(repoRoot(b), "testdata", "pod4k.json"))
	if err != nil {
		b.Fatal(err)
	}
	req, err := json.Marshal(abi.AdmitRequest{Pod: pod})
	if err != nil {
		b.Fatal(err)
	}

	b.Run("native-encoding-json", func(b *testing.B) {
		nativeCPU = 0
		nativeCPU = measure(b, func() {
			if !nativeAdmit(b, req) {
				b.Fatal("pod4k denied")
			}
		})
	})
	goWasm, err := plugintest.BuildGo(filepath.Join(repoRoot(b), "examples", "plugins", "deny-privileged"))
	if err != nil {
		b.Fatal(err)
	}
	// deny-privileged registers with sdk.Reads(0); plugintest's "everything"
	// plugin registers without options, so every field of the pod is
	// decoded (its Admit does nothing else for this pod): the default cost.
	allWasm, err := plugintest.BuildGo(filepath.Join(repoRoot(b), "plugintest", "testdata", "everything"))
	if err != nil {
		b.Fatal(err)
	}
	cWasm := buildC(b)
	stdWasm := buildStdJSONGuest(b)
	for _, m := range []struct {
		name, path string
		mode       plugin.DeadlineMode
	}{
		{"wasm-go-encoding-json", stdWasm, plugin.DeadlineAuto},
		{"wasm-go-encoding-json-nodeadline", stdWasm, plugin.DeadlineNone},
		{"wasm-go-sdk", goWasm, plugin.DeadlineAuto},
		{"wasm-go-sdk-nodeadline", goWasm, plugin.DeadlineNone},
		{"wasm-go-sdk-allparts", allWasm, plugin.DeadlineAuto},
		{"wasm-c", cWasm, plugin.DeadlineAuto},
	} {
		p, err := plugintest.TryLoad(plugin.LoadConfig{Path: m.path, Config: plugin.Config{PoolSize: 1, Deadline: m.mode}})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		// call: the request bytes in, the response decoded, as the baseline
		// does; admit: the host's Admit, which also encodes the request.
		b.Run(m.name+"/"+string(p.DeadlineMode())+"/call", func(b *testing.B) {
			measure(b, func() {
				out, err := p.Call(ctx, abi.KindAdmission, req)
				if err != nil {
					b.Fatal(err)
				}
				allowedOrFatal(b, out)
			})
		})
		b.Run(m.name+"/"+string(p.DeadlineMode())+"/admit", func(b *testing.B) {
			areq := &abi.AdmitRequest{Pod: pod}
			measure(b, func() {
				resp, err := p.Admit(ctx, areq)
				if err != nil || !resp.Allowed {
					b.Fatalf("admit: %+v %v", resp, err)
				}
			})
		})
		p.Close(context.Background())
	}
}

// nativeAdmit is the policy written the usual way: encoding/json into
// k8s.io/api types, and an encoded response.
func nativeAdmit(b *testing.B, req []byte) bool {
	var r struct {
		Pod v1.Pod `json:"pod"`
	}
	if err := json.Unmarshal(req, &r); err != nil {
		b.Fatal(err)
	}
	resp := abi.AdmitResponse{Allowed: true}
	spec := &r.Pod.Spec
	check := func(name string, sc *v1.SecurityContext) {
		if resp.Allowed && sc != nil && sc.Privileged != nil && *sc.Privileged {
			resp = abi.AdmitResponse{Reason: "Privileged", Message: "container " + name + " is privileged"}
		}
	}
	for _, c := range spec.InitContainers {
		check(c.Name, c.SecurityContext)
	}
	for _, c := range spec.Containers {
		check(c.Name, c.SecurityContext)
	}
	for _, c := range spec.EphemeralContainers {
		check(c.Name, c.SecurityContext)
	}
	out, err := json.Marshal(resp)
	if err != nil || len(out) == 0 {
		b.Fatal(err)
	}
	return resp.Allowed
}

func allowedOrFatal(b *testing.B, out []byte) {
	var resp abi.AdmitResponse
	if err := json.Unmarshal(out, &resp); err != nil || !resp.Allowed {
		b.Fatalf("response %s: %v", out, err)
	}
}

// buildC builds the C example with the project's build script.
func buildC(b *testing.B) string {
	root := repoRoot(b)
	out := filepath.Join(plugintest.CacheDir(), "build", "c")
	cmd := exec.Command(filepath.Join(root, "hack", "build-plugins.sh"), out, "examples/plugins/deny-privileged-c")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the C plugin: %v\n%s", err, msg)
	}
	return filepath.Join(out, "deny-privileged-c.wasm")
}

// stdJSONMain is a Go guest on the raw ABI that decodes with encoding/json
// into the SDK's pod types: what a plugin without the SDK's decoder costs
// (DESIGN.md's 640 µs), measured in the same run as the others.
const stdJSONMain = `package main

import (
	"encoding/json"
	"unsafe"
)

var input, output []byte

//go:wasmexport wasmlet_abi_v1
func marker() {}

//go:wasmexport wasmlet_alloc
func alloc(size int32) int32 {
	input = make([]byte, size)
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

// EnvVar is sdk.EnvVar (an alias of abi.EnvVar, outside sdk/pod.go).
type EnvVar struct {
	Name  string ` + "`json:\"name\"`" + `
	Value string ` + "`json:\"value\"`" + `
}

type response struct {
	Allowed bool   ` + "`json:\"allowed\"`" + `
	Reason  string ` + "`json:\"reason,omitempty\"`" + `
	Error   string ` + "`json:\"error,omitempty\"`" + `
}

//go:wasmexport wasmlet_admit
func admit(ptr, size int32) int64 {
	var req struct {
		Pod Pod ` + "`json:\"pod\"`" + `
	}
	resp := response{Allowed: true}
	if err := json.Unmarshal(input, &req); err != nil {
		resp = response{Error: err.Error()}
	}
	for _, c := range req.Pod.Spec.AllContainers() {
		if c.SecurityContext.IsPrivileged() {
			resp = response{Reason: "Privileged"}
		}
	}
	output, _ = json.Marshal(resp)
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(output))))<<32 | int64(len(output))
}

func main() {}
`

// buildStdJSONGuest builds stdJSONMain with a copy of sdk/pod.go's types
// and helpers (its decode functions left out) in a module of its own.
func buildStdJSONGuest(b *testing.B) string {
	src, err := os.ReadFile(filepath.Join(repoRoot(b), "sdk", "pod.go"))
	if err != nil {
		b.Fatal(err)
	}
	types, _, ok := strings.Cut(string(src), "// DecodePod decodes")
	if !ok {
		b.Fatal("sdk/pod.go: marker comment not found")
	}
	types = strings.Replace(types, "package sdk", "package main", 1)
	dir := filepath.Join(plugintest.CacheDir(), "build", "stdjson")
	files := map[string]string{"go.mod": "module stdjson\n\ngo 1.26\n", "main.go": stdJSONMain, "types.go": types}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(dir, "stdjson.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=-mod=mod", "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the encoding/json guest: %v\n%s", err, msg)
	}
	return out
}

func repoRoot(tb testing.TB) string {
	dir, err := filepath.Abs(".")
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}
