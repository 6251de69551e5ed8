//go:build !wasip1

package main

import (
	"reflect"
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
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
		{"PreCreate gets env, labels, annotations", config, sdk.HookRequest{Point: sdk.HookPreCreate, Container: &sdk.Container{Name: "c"}},
			sdk.Adjustment{Env: []sdk.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x=y"}}, Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"an": "av"}}, false},
		{"PreSandbox gets no env", config, sdk.HookRequest{Point: sdk.HookPreSandbox},
			sdk.Adjustment{Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"an": "av"}}, false},
		{"PostStart gets nothing", config, sdk.HookRequest{Point: sdk.HookPostStart}, sdk.Adjustment{}, false},
		{"other namespace", map[string]string{"env": "A=1", "namespaces": "prod"}, sdk.HookRequest{Point: sdk.HookPreCreate, Pod: sdk.Pod{ObjectMeta: sdk.ObjectMeta{Namespace: "dev"}}}, sdk.Adjustment{}, false},
		{"listed namespace", map[string]string{"env": "A=1", "namespaces": "prod"}, sdk.HookRequest{Point: sdk.HookPreCreate, Pod: sdk.Pod{ObjectMeta: sdk.ObjectMeta{Namespace: "prod"}}}, sdk.Adjustment{Env: []sdk.EnvVar{{Name: "A", Value: "1"}}}, false},
		{"bad line", map[string]string{"env": "NOEQUALS"}, sdk.HookRequest{Point: sdk.HookPreCreate}, sdk.Adjustment{}, true},
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
