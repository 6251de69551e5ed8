package shipped

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/plugintest"
)

// injectEnvConfig is inject-env's config in TestInjectEnv_Wasm (the same as
// in the plugin's native tests).
var injectEnvConfig = map[string]string{
	"env":         "A=1\nB=x=y\n",
	"labels":      "l=v",
	"annotations": "an=av\n# comment\n",
}

// TestInjectEnv_Wasm runs the compiled .wasm through wasmlet's plugin host.
func TestInjectEnv_Wasm(t *testing.T) {
	p := plugintest.Load(t, plugintest.Build(t, "../../plugins/inject-env"), injectEnvConfig)
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
	bad := plugintest.Load(t, plugintest.Build(t, "../../plugins/inject-env"), map[string]string{"env": "oops"})
	if _, err := bad.Hook(abi.HookRequest{Point: abi.HookPreCreate, Pod: pod}); err == nil {
		t.Fatal("a malformed env line did not fail the call")
	}
}
