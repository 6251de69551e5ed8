//go:build !wasip1

package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/sdk"
	"github.com/wasmlet/wasmlet/sdk/sdktest"
)

var config = map[string]string{
	"env":         "A=1\nB=x=y\n",
	"labels":      "l=v",
	"annotations": "an=av\n# comment\n",
}

func TestInjectEnv_Hook(t *testing.T) {
	tests := []struct {
		name   string
		config map[string]string
		req    sdk.HookRequest
		want   sdk.Adjustment
		err    bool
	}{
		{"PreCreate gets env, labels, annotations", config, sdk.HookRequest{Point: abi.HookPreCreate, Container: &sdk.Container{Name: "c"}},
			sdk.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x=y"}}, Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"an": "av"}}, false},
		{"PreSandbox gets no env", config, sdk.HookRequest{Point: abi.HookPreSandbox},
			sdk.Adjustment{Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"an": "av"}}, false},
		{"PostStart gets nothing", config, sdk.HookRequest{Point: abi.HookPostStart}, sdk.Adjustment{}, false},
		{"other namespace", map[string]string{"env": "A=1", "namespaces": "prod"}, sdk.HookRequest{Point: abi.HookPreCreate, Pod: sdk.Pod{ObjectMeta: sdk.ObjectMeta{Namespace: "dev"}}}, sdk.Adjustment{}, false},
		{"listed namespace", map[string]string{"env": "A=1", "namespaces": "prod"}, sdk.HookRequest{Point: abi.HookPreCreate, Pod: sdk.Pod{ObjectMeta: sdk.ObjectMeta{Namespace: "prod"}}}, sdk.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}}}, false},
		{"bad line", map[string]string{"env": "NOEQUALS"}, sdk.HookRequest{Point: abi.HookPreCreate}, sdk.Adjustment{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := sdk.UseNativeHost(&sdk.NativeHost{Config: tt.config})
			t.Cleanup(func() { sdk.UseNativeHost(prev) })
			got, err := injectEnv{}.Hook(tt.req)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if !tt.err && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("adjustment = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestInjectEnv_Wasm runs the compiled .wasm through wasmlet's plugin host.
func TestInjectEnv_Wasm(t *testing.T) {
	p := sdktest.Load(t, sdktest.Build(t, "."), config)
	pod, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "p", "namespace": "default"}})
	resp, err := p.Hook(abi.HookRequest{Point: abi.HookPreCreate, Pod: pod, Container: json.RawMessage(`{"name":"c","image":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := &abi.Adjustment{Env: []abi.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x=y"}}, Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"an": "av"}}
	if !reflect.DeepEqual(resp.Adjustment, want) {
		t.Fatalf("adjustment = %+v, want %+v", resp.Adjustment, want)
	}
	resp, err = p.Hook(abi.HookRequest{Point: abi.HookPreStop, Pod: pod})
	if err != nil || resp.Adjustment != nil && len(resp.Adjustment.Env) > 0 {
		t.Fatalf("PreStop: %+v, %v", resp, err)
	}
	bad := sdktest.Load(t, sdktest.Build(t, "."), map[string]string{"env": "oops"})
	if _, err := bad.Hook(abi.HookRequest{Point: abi.HookPreCreate, Pod: pod}); err == nil {
		t.Fatal("a malformed env line did not fail the call")
	}
}
