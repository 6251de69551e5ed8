package extension

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/container"
)

// answering installs the answer fixture as hook plugin name, answering
// every call with response; extra is more manifest YAML.
func answering(t testing.TB, dir, name, response, extra string) {
	t.Helper()
	install(t, dir, name, "answer.wasm", []abi.Kind{abi.KindHook}, fmt.Sprintf("config:\n  response: '%s'\n%s", response, extra))
}

const mountAdj = `{"adjustment":{"mounts":[{"hostPath":"/srv/shared","containerPath":"/shared","readOnly":true}]}}`

func TestExtension_Hook_adjustments(t *testing.T) {
	type plugin struct{ name, response, extra string }
	mounts := "permissions:\n  adjust: [mounts]\n  hostPaths: [/srv/shared]\n"
	tests := []struct {
		name    string
		plugins []plugin
		errSub  []string // empty: no error
		mounts  int      // mounts in the merged adjustment
	}{
		{name: "declared mount", plugins: []plugin{{"mounter", mountAdj, mounts}}, mounts: 1},
		{name: "undeclared mount under Fail", plugins: []plugin{{"mounter", mountAdj, ""}},
			errSub: []string{"hook plugin mounter", "pod default/p", `adjustment field "mounts" is not declared`}},
		{name: "undeclared mount under Ignore is dropped", plugins: []plugin{{"mounter", mountAdj, "failurePolicy: Ignore\n"}}},
		{name: "host path outside the declared ones", plugins: []plugin{{"mounter", mountAdj, "permissions:\n  adjust: [mounts]\n  hostPaths: [/srv/other]\n"}},
			errSub: []string{"hook plugin mounter", `mounts[0].hostPath "/srv/shared"`}},
		{name: "the same mount from two plugins", plugins: []plugin{{"a", mountAdj, mounts + "order: 1\n"}, {"b", mountAdj, mounts + "order: 2\n"}}, mounts: 1},
		{name: "conflict under Ignore is still refused", plugins: []plugin{
			{"a", mountAdj, mounts + "order: 1\nfailurePolicy: Ignore\n"},
			{"b", `{"adjustment":{"mounts":[{"hostPath":"/srv/shared/b","containerPath":"/shared"}]}}`, mounts + "order: 2\nfailurePolicy: Ignore\n"},
		}, errSub: []string{"hook plugins a and b conflict", "mounts:/shared"}},
		{name: "env conflict between two plugins", plugins: []plugin{
			{"a", `{"adjustment":{"env":[{"name":"X","value":"1"}]}}`, "order: 1\n"},
			{"b", `{"adjustment":{"env":[{"name":"X","value":"2"}]}}`, "order: 2\n"},
		}, errSub: []string{"hook plugins a and b conflict", "env:X"}},
		{name: "a validator is not called at PreCreate", plugins: []plugin{
			{"mounter", mountAdj, mounts},
			{"validator", `{"adjustment":{"env":[{"name":"X","value":"1"}]},"refuse":"no"}`, "points: [Validate]\n"},
		}, mounts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, p := range tt.plugins {
				answering(t, dir, p.name, p.response, p.extra)
			}
			e, _ := setup(t, dir, nil)
			pod := testPod("p")
			adj, err := e.Hook(context.Background(), container.HookPreCreate, pod, &pod.Spec.Containers[0])
			if len(tt.errSub) > 0 {
				for _, s := range tt.errSub {
					if err == nil || !strings.Contains(err.Error(), s) {
						t.Fatalf("Hook = %v, want an error mentioning %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if adj != nil {
				got = len(adj.Mounts)
				if len(adj.Env) != 0 {
					t.Errorf("env %v: the validator's adjustment was applied", adj.Env)
				}
			}
			if got != tt.mounts {
				t.Fatalf("merged mounts = %d (%+v), want %d", got, adj, tt.mounts)
			}
			if got > 0 && (!adj.Mounts[0].Readonly || adj.Mounts[0].HostPath != "/srv/shared" || adj.Owners["mounts:/shared"] == "") {
				t.Errorf("mount %+v, owners %v", adj.Mounts[0], adj.Owners)
			}
		})
	}
}

func TestExtension_Validate(t *testing.T) {
	dir := t.TempDir()
	answering(t, dir, "validator", `{"refuse":"host path /etc is not on the allow-list"}`, "points: [Validate]\n")
	answering(t, dir, "watcher", `{}`, "points: [PostStop, PreUpdate]\n")
	e, _ := setup(t, dir, nil)
	pod := testPod("p")
	c := &pod.Spec.Containers[0]
	cfg := &runtimeapi.ContainerConfig{Image: &runtimeapi.ImageSpec{Image: "i"}, Mounts: []*runtimeapi.Mount{{HostPath: "/etc", ContainerPath: "/host-etc"}}}
	err := e.Validate(context.Background(), pod, c, cfg, nil)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Plugin != "validator" || refused.Message != "host path /etc is not on the allow-list" {
		t.Fatalf("Validate = %v, want the validator's refusal", err)
	}
	for _, tt := range []struct {
		point container.HookPoint
		want  bool
	}{{container.HookValidate, true}, {container.HookPostStop, true}, {container.HookPreUpdate, true}, {container.HookPreCreate, false}, {container.HookPreSandbox, false}} {
		if got := e.Subscribed(tt.point); got != tt.want {
			t.Errorf("Subscribed(%s) = %v, want %v", tt.point, got, tt.want)
		}
	}
	code := int32(3)
	if err := e.PostStop(context.Background(), pod, c, container.Exit{Code: &code, Reason: "Error"}); err != nil {
		t.Errorf("PostStop = %v", err)
	}
	if err := e.PreUpdate(context.Background(), pod, c, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 20}); err != nil {
		t.Errorf("PreUpdate = %v", err)
	}
}

// The answer fixture answers per point: a PreCreate answer is not a
// PreSandbox one.
func TestExtension_Hook_perPoint(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "answer", "answer.wasm", []abi.Kind{abi.KindHook},
		"config:\n  PreCreate: '{\"adjustment\":{\"env\":[{\"name\":\"P\",\"value\":\"create\"}]}}'\n"+
			"  PreSandbox: '{\"adjustment\":{\"labels\":{\"p\":\"sandbox\"}}}'\n  log: 'yes'\n")
	e, _ := setup(t, dir, nil)
	pod := testPod("p")
	adj, err := e.Hook(context.Background(), container.HookPreCreate, pod, &pod.Spec.Containers[0])
	if err != nil || adj == nil || len(adj.Env) != 1 || adj.Env[0].Value != "create" || len(adj.Labels) != 0 {
		t.Fatalf("PreCreate: %+v, %v", adj, err)
	}
	adj, err = e.Hook(context.Background(), container.HookPreSandbox, pod, nil)
	if err != nil || adj == nil || adj.Labels["p"] != "sandbox" {
		t.Fatalf("PreSandbox: %+v, %v", adj, err)
	}
}

func TestExtension_PreUpdate_failure(t *testing.T) {
	dir := t.TempDir()
	answering(t, dir, "guard", `{"error":"resize not allowed"}`, "points: [PreUpdate]\n")
	e, _ := setup(t, dir, nil)
	pod := testPod("p")
	err := e.PreUpdate(context.Background(), pod, &pod.Spec.Containers[0], &runtimeapi.LinuxContainerResources{})
	if err == nil || !strings.Contains(err.Error(), "guard") || !strings.Contains(err.Error(), "resize not allowed") {
		t.Fatalf("PreUpdate = %v, want the plugin's failure naming it", err)
	}
}

// The raw-ABI C hook (pluginhost/testdata/c/cmount.c) asks for a mount:
// refused until its manifest declares adjust and hostPaths, dropped under
// Ignore, applied once declared.
func TestExtension_Hook_cPlugin(t *testing.T) {
	tests := []struct {
		name   string
		extra  string
		errSub string
		mounts int
	}{
		{"undeclared", "", `adjustment field "mounts" is not declared`, 0},
		{"adjust without the host path", "permissions:\n  adjust: [mounts]\n  hostPaths: [/srv/other]\n", `mounts[0].hostPath "/srv/shared": not under`, 0},
		{"undeclared under Ignore", "failurePolicy: Ignore\n", "", 0},
		{"declared", "permissions:\n  adjust: [mounts]\n  hostPaths: [/srv/shared]\n", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			install(t, dir, "cmount", "cmount.wasm", []abi.Kind{abi.KindHook}, tt.extra)
			e, _ := setup(t, dir, nil)
			pod := testPod("p")
			adj, err := e.Hook(context.Background(), container.HookPreCreate, pod, &pod.Spec.Containers[0])
			if tt.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSub) || !strings.Contains(err.Error(), "hook plugin cmount") || !strings.Contains(err.Error(), "pod default/p") {
					t.Fatalf("Hook = %v, want an error naming the plugin, the pod and %q", err, tt.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if adj != nil {
				got = len(adj.Mounts)
			}
			if got != tt.mounts {
				t.Fatalf("mounts = %d (%+v), want %d", got, adj, tt.mounts)
			}
			if got == 1 && (adj.Mounts[0].ContainerPath != "/shared" || !adj.Mounts[0].Readonly) {
				t.Errorf("mount %+v", adj.Mounts[0])
			}
		})
	}
}
