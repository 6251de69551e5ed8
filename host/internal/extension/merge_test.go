package extension

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

func TestMerger_Add(t *testing.T) {
	mem := func(v int64) *abi.Resources { return &abi.Resources{MemoryLimitBytes: &v} }
	type step struct {
		plugin string
		adj    abi.Adjustment
	}
	tests := []struct {
		name   string
		steps  []step
		errSub string // empty: no conflict
		check  func(*abi.Adjustment) string
	}{
		{name: "env, labels and annotations of two plugins merge", steps: []step{
			{"a", abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}}, Labels: map[string]string{"l": "1"}}},
			{"b", abi.Adjustment{Env: []abi.EnvVar{{Name: "B", Value: "2"}}, Annotations: map[string]string{"n": "x"}}},
		}, check: func(a *abi.Adjustment) string {
			if fmt.Sprint(a.Env) != "[{A 1} {B 2}]" || a.Labels["l"] != "1" || a.Annotations["n"] != "x" {
				return fmt.Sprintf("merged %+v", a)
			}
			return ""
		}},
		{name: "same env value twice is no conflict", steps: []step{
			{"a", abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}}}},
			{"b", abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}}}},
		}},
		{name: "env set to different values", steps: []step{
			{"a", abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}}}},
			{"b", abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "2"}}}},
		}, errSub: "hook plugins a and b conflict: both set env:A, to different values"},
		{name: "label set to different values", steps: []step{
			{"a", abi.Adjustment{Labels: map[string]string{"l": "1"}}},
			{"b", abi.Adjustment{Labels: map[string]string{"l": "2"}}},
		}, errSub: "hook plugins a and b conflict: both set labels:l"},
		{name: "two mounts at one path", steps: []step{
			{"a", abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/a", ContainerPath: "/data"}}}},
			{"b", abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/b", ContainerPath: "/data"}}}},
		}, errSub: "both set mounts:/data"},
		{name: "the same mount twice", steps: []step{
			{"a", abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/a", ContainerPath: "/data", ReadOnly: true}}}},
			{"b", abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/a", ContainerPath: "/data", ReadOnly: true}}}},
		}, check: func(a *abi.Adjustment) string {
			if len(a.Mounts) != 1 {
				return fmt.Sprintf("mounts %+v, want one", a.Mounts)
			}
			return ""
		}},
		{name: "device defaults make equal devices equal", steps: []step{
			{"a", abi.Adjustment{Devices: []abi.Device{{HostPath: "/dev/fuse"}}}},
			{"b", abi.Adjustment{Devices: []abi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rwm"}}}},
		}},
		{name: "memory limits differ", steps: []step{
			{"a", abi.Adjustment{Resources: mem(1 << 20)}},
			{"b", abi.Adjustment{Resources: mem(2 << 20)}},
		}, errSub: "both set resources:memoryLimitBytes"},
		{name: "different resource fields merge", steps: []step{
			{"a", abi.Adjustment{Resources: mem(1 << 20)}},
			{"b", abi.Adjustment{Resources: &abi.Resources{CpusetCPUs: "0"}}},
		}, check: func(a *abi.Adjustment) string {
			if a.Resources.MemoryLimitBytes == nil || *a.Resources.MemoryLimitBytes != 1<<20 || a.Resources.CpusetCPUs != "0" {
				return fmt.Sprintf("resources %+v", a.Resources)
			}
			return ""
		}},
		{name: "OOM scores differ", steps: []step{
			{"a", abi.Adjustment{OOMScoreAdj: new(int64(100))}},
			{"b", abi.Adjustment{OOMScoreAdj: new(int64(200))}},
		}, errSub: "both set oomScoreAdj"},
		{name: "sysctls differ", steps: []step{
			{"a", abi.Adjustment{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}}},
			{"b", abi.Adjustment{Sysctls: map[string]string{"kernel.shm_rmid_forced": "0"}}},
		}, errSub: "both set sysctls:kernel.shm_rmid_forced"},
		{name: "removing what another added", steps: []step{
			{"a", abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}}}},
			{"b", abi.Adjustment{Remove: &abi.Removal{Env: []string{"A"}}}},
		}, errSub: "hook plugins a and b conflict: one removes env:A, which the other adds"},
		{name: "adding what another removed", steps: []step{
			{"a", abi.Adjustment{Remove: &abi.Removal{Mounts: []string{"/data"}}}},
			{"b", abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv", ContainerPath: "/data"}}}},
		}, errSub: "hook plugins a and b conflict: one removes mounts:/data"},
		{name: "two removals of one item", steps: []step{
			{"a", abi.Adjustment{Remove: &abi.Removal{Annotations: []string{"k"}}}},
			{"b", abi.Adjustment{Remove: &abi.Removal{Annotations: []string{"k"}}}},
		}, check: func(a *abi.Adjustment) string {
			if fmt.Sprint(a.Remove.Annotations) != "[k]" {
				return fmt.Sprintf("removals %+v", a.Remove)
			}
			return ""
		}},
		{name: "one plugin replacing what the pod set", steps: []step{
			{"a", abi.Adjustment{Remove: &abi.Removal{Env: []string{"A"}}, Env: []abi.EnvVar{{Name: "A", Value: "1"}}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m merger
			var err error
			for _, s := range tt.steps {
				if err = m.add(s.plugin, &s.adj); err != nil {
					break
				}
			}
			if tt.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSub) {
					t.Fatalf("merge error = %v, want one mentioning %q", err, tt.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, owners := m.result()
			if out == nil || owners == nil {
				t.Fatal("no result")
			}
			if tt.check != nil {
				if msg := tt.check(out); msg != "" {
					t.Error(msg)
				}
			}
			if owners[firstKey(tt.steps[0].adj)] != tt.steps[0].plugin {
				t.Errorf("owners %v: the first plugin does not own its key", owners)
			}
		})
	}
}

// firstKey is a conflict key a's first field claims.
func firstKey(a abi.Adjustment) string {
	switch {
	case len(a.Env) > 0:
		return "env:" + a.Env[0].Name
	case len(a.Mounts) > 0:
		return "mounts:" + a.Mounts[0].ContainerPath
	case len(a.Devices) > 0:
		return "devices:" + a.Devices[0].HostPath
	case a.Resources != nil && a.Resources.MemoryLimitBytes != nil:
		return "resources:memoryLimitBytes"
	case a.Remove != nil:
		return "remove:annotations:" + a.Remove.Annotations[0]
	}
	return ""
}

func TestPermit(t *testing.T) {
	declared := &abi.Manifest{Permissions: abi.Permissions{
		Adjust:    []abi.AdjustField{abi.AdjustMounts, abi.AdjustDevices, abi.AdjustCDIDevices, abi.AdjustResources},
		HostPaths: []string{"/srv/shared", "/dev/fuse"},
	}}
	tests := []struct {
		name   string
		m      *abi.Manifest
		adj    abi.Adjustment
		errSub string
	}{
		{"default env", &abi.Manifest{}, abi.Adjustment{Env: []abi.EnvVar{{Name: "A"}}}, ""},
		{"undeclared mount", &abi.Manifest{}, abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/shared", ContainerPath: "/x"}}},
			`adjustment field "mounts" is not declared in the manifest's permissions.adjust`},
		{"undeclared env", declared, abi.Adjustment{Env: []abi.EnvVar{{Name: "A"}}}, `adjustment field "env" is not declared`},
		{"mount allowed", declared, abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/shared/sub", ContainerPath: "/x", ReadOnly: true}}}, ""},
		{"mount outside host paths", declared, abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/etc", ContainerPath: "/x"}}},
			`mounts[0].hostPath "/etc": not under the manifest's permissions.hostPaths`},
		{"mount climbing out", declared, abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/shared/../../etc", ContainerPath: "/x"}}}, "not under"},
		{"relative container path", declared, abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/shared", ContainerPath: "x"}}}, "mounts[0].containerPath"},
		{"bad propagation", declared, abi.Adjustment{Mounts: []abi.Mount{{HostPath: "/srv/shared", ContainerPath: "/x", Propagation: "Shared"}}}, "mounts[0].propagation"},
		{"device allowed", declared, abi.Adjustment{Devices: []abi.Device{{HostPath: "/dev/fuse", Permissions: "rw"}}}, ""},
		{"device outside", declared, abi.Adjustment{Devices: []abi.Device{{HostPath: "/dev/sda"}}}, `devices[0].hostPath "/dev/sda"`},
		{"device permissions", declared, abi.Adjustment{Devices: []abi.Device{{HostPath: "/dev/fuse", Permissions: "rwx"}}}, "devices[0].permissions"},
		{"CDI name", declared, abi.Adjustment{CDIDevices: []string{"gpu0"}}, "cdiDevices[0]"},
		{"CDI qualified", declared, abi.Adjustment{CDIDevices: []string{"vendor.com/gpu=0"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := permit(tt.m, honouredAt(abi.HookPreCreate, &tt.adj))
			if tt.errSub == "" {
				if err != nil {
					t.Fatalf("permit = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errSub) {
				t.Fatalf("permit = %v, want an error mentioning %q", err, tt.errSub)
			}
		})
	}
}

func TestHonouredAt(t *testing.T) {
	a := &abi.Adjustment{Env: []abi.EnvVar{{Name: "A"}}, Labels: map[string]string{"l": "v"}, Sysctls: map[string]string{"k": "v"},
		Mounts: []abi.Mount{{HostPath: "/a", ContainerPath: "/b"}}, Remove: &abi.Removal{Env: []string{"A"}, Annotations: []string{"k"}}}
	sb := honouredAt(abi.HookPreSandbox, a)
	if fmt.Sprint(sb.Fields()) != "[labels sysctls remove]" || len(sb.Remove.Env) != 0 {
		t.Errorf("at PreSandbox: %v, %+v", sb.Fields(), sb.Remove)
	}
	if c := honouredAt(abi.HookPreCreate, a); fmt.Sprint(c.Fields()) != "[env labels mounts remove]" {
		t.Errorf("at PreCreate: %v", c.Fields())
	}
	if len(a.Env) != 1 || a.Sysctls == nil {
		t.Error("honouredAt changed its argument")
	}
}
