package extension

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/container"
)

// constants returns the string constants of type typeName declared in the
// package importPath, read from its source, so that a constant added to the
// ABI (or to the core) without a case in convert.go fails the tests below
// even if nobody lists it anywhere.
func constants(t *testing.T, importPath, typeName string) []string {
	t.Helper()
	pkg, err := build.Import(importPath, ".", 0)
	if err != nil {
		t.Fatalf("locate %s: %v", importPath, err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			typ := "" // a spec without type or values repeats the previous one's
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil || len(vs.Values) > 0 {
					typ = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = id.Name
					}
				}
				if typ != typeName {
					continue
				}
				for i, n := range vs.Names {
					var lit *ast.BasicLit
					if i < len(vs.Values) {
						lit, _ = vs.Values[i].(*ast.BasicLit)
					}
					if lit == nil || lit.Kind != token.STRING {
						t.Fatalf("%s.%s is not a string literal: update convert.go and this test", importPath, n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, v)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constants of type %s in %s", typeName, importPath)
	}
	sort.Strings(out)
	return out
}

func TestOpFromABI(t *testing.T) {
	want := map[abi.Op]config.Op{
		abi.OpSet:    config.OpSet,
		abi.OpAdd:    config.OpAdd,
		abi.OpUpdate: config.OpUpdate,
		abi.OpRemove: config.OpRemove,
		abi.OpDelete: config.OpDelete,
	}
	for _, v := range constants(t, "github.com/wasmlet/wasmlet/abi", "Op") {
		op := abi.Op(v)
		got, ok := opFromABI(op)
		if !ok {
			t.Errorf("abi.Op %q has no core operation: add it to opFromABI and opToABI", op)
			continue
		}
		if w, listed := want[op]; !listed || got != w {
			t.Errorf("opFromABI(%q) = %q, want %q (listed %v)", op, got, w, listed)
		}
		if back, ok := opToABI(got); !ok || back != op {
			t.Errorf("opToABI(opFromABI(%q)) = %q, %v", op, back, ok)
		}
	}
	for _, bad := range []abi.Op{"RECONCILE", "", "set"} {
		if got, ok := opFromABI(bad); ok {
			t.Errorf("opFromABI(%q) = %q, want no operation", bad, got)
		}
	}
}

func TestOpToABI(t *testing.T) {
	for _, v := range constants(t, "github.com/wasmlet/wasmlet/host/internal/config", "Op") {
		op := config.Op(v)
		got, ok := opToABI(op)
		if op == config.OpReconcile {
			if ok {
				t.Errorf("opToABI(%q) = %q: RECONCILE is the merge's own, no source sends it", op, got)
			}
			continue
		}
		if !ok {
			t.Errorf("config.Op %q has no ABI operation: add it to opToABI and opFromABI", op)
			continue
		}
		if back, ok := opFromABI(got); !ok || back != op {
			t.Errorf("opFromABI(opToABI(%q)) = %q, %v", op, back, ok)
		}
	}
}

func TestHookPointFromABI(t *testing.T) {
	want := map[abi.HookPoint]container.HookPoint{
		abi.HookPreSandbox:    container.HookPreSandbox,
		abi.HookPreCreate:     container.HookPreCreate,
		abi.HookValidate:      container.HookValidate,
		abi.HookPreUpdate:     container.HookPreUpdate,
		abi.HookPostStop:      container.HookPostStop,
		abi.HookPostStart:     container.HookPostStart,
		abi.HookPreStop:       container.HookPreStop,
		abi.HookPodTerminated: container.HookPodTerminated,
	}
	points := constants(t, "github.com/wasmlet/wasmlet/abi", "HookPoint")
	if len(points) != len(abi.HookPoints) {
		t.Errorf("abi declares %d hook points, abi.HookPoints lists %d", len(points), len(abi.HookPoints))
	}
	for _, v := range points {
		p := abi.HookPoint(v)
		got, ok := hookPointFromABI(p)
		if !ok {
			t.Errorf("abi.HookPoint %q has no runtime hook point: add it to hookPointFromABI and hookPointToABI", p)
			continue
		}
		if w, listed := want[p]; !listed || got != w {
			t.Errorf("hookPointFromABI(%q) = %q, want %q (listed %v)", p, got, w, listed)
		}
		if back, ok := hookPointToABI(got); !ok || back != p {
			t.Errorf("hookPointToABI(hookPointFromABI(%q)) = %q, %v", p, back, ok)
		}
	}
	if got, ok := hookPointFromABI("PostCreate"); ok {
		t.Errorf("hookPointFromABI(PostCreate) = %q, want no point", got)
	}
}

func TestHookPointToABI(t *testing.T) {
	for _, v := range constants(t, "github.com/wasmlet/wasmlet/host/internal/container", "HookPoint") {
		p := container.HookPoint(v)
		got, ok := hookPointToABI(p)
		if !ok {
			t.Errorf("container.HookPoint %q has no ABI hook point: add it to hookPointToABI and hookPointFromABI", p)
			continue
		}
		if back, ok := hookPointFromABI(got); !ok || back != p {
			t.Errorf("hookPointFromABI(hookPointToABI(%q)) = %q, %v", p, back, ok)
		}
	}
	if got, ok := hookPointToABI("PostCreate"); ok {
		t.Errorf("hookPointToABI(PostCreate) = %q, want no point", got)
	}
}

func TestAdjustmentFromABI(t *testing.T) {
	if got := adjustmentFromABI(nil, nil); got != nil {
		t.Errorf("adjustmentFromABI(nil) = %+v", got)
	}
	mem, oom := int64(64<<20), int64(-500)
	in := &abi.Adjustment{
		Env:         []abi.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}},
		Labels:      map[string]string{"l": "v"},
		Annotations: map[string]string{"a": "w"},
		Mounts:      []abi.Mount{{HostPath: "/srv", ContainerPath: "/data", ReadOnly: true, Propagation: abi.PropagationHostToContainer}},
		Devices:     []abi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rw"}},
		CDIDevices:  []string{"vendor.com/gpu=0"},
		Resources:   &abi.Resources{MemoryLimitBytes: &mem, CpusetCPUs: "0", HugepageLimits: []abi.HugepageLimit{{PageSize: "2MB", Limit: 2 << 20}}},
		OOMScoreAdj: &oom,
		Sysctls:     map[string]string{"kernel.shm_rmid_forced": "1"},
		Remove:      &abi.Removal{Env: []string{"X"}, Mounts: []string{"/m"}, Annotations: []string{"k"}},
	}
	owners := map[string]string{"mounts:/data": "p"}
	want := &container.Adjustment{
		Env:         []container.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}},
		Labels:      map[string]string{"l": "v"},
		Annotations: map[string]string{"a": "w"},
		Mounts: []*runtimeapi.Mount{{HostPath: "/srv", ContainerPath: "/data", Readonly: true,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}},
		Devices:     []*runtimeapi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rw"}},
		CDIDevices:  []string{"vendor.com/gpu=0"},
		Resources:   &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mem, CpusetCpus: "0", HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 2 << 20}}},
		OOMScoreAdj: &oom,
		Sysctls:     map[string]string{"kernel.shm_rmid_forced": "1"},
		Remove:      container.Removal{Env: []string{"X"}, Mounts: []string{"/m"}, Annotations: []string{"k"}},
		Owners:      owners,
	}
	if got := adjustmentFromABI(in, owners); !reflect.DeepEqual(got, want) {
		t.Errorf("adjustmentFromABI = %+v, want %+v", got, want)
	}
	if got := adjustmentFromABI(&abi.Adjustment{}, nil); !reflect.DeepEqual(got, &container.Adjustment{}) {
		t.Errorf("adjustmentFromABI(empty) = %+v", got)
	}
	// Every field of the ABI's adjustment has its counterpart (and the
	// runtime's has Owners besides): a field added to abi.Adjustment must be
	// translated too.
	if a, r := reflect.TypeFor[abi.Adjustment]().NumField(), reflect.TypeFor[container.Adjustment]().NumField(); a != r-1 {
		t.Errorf("abi.Adjustment has %d fields, container.Adjustment %d: translate the new one in adjustmentFromABI", a, r)
	}
}
