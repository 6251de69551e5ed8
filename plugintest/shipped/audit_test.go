package shipped

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/plugintest"
)

// TestAudit_Wasm checks the compiled module logs through the host's log,
// PostStop's exit code and reason included.
func TestAudit_Wasm(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug})
	p := plugintest.LoadWith(t, plugin.LoadConfig{Path: plugintest.Build(t, "../../plugins/audit"), Config: plugin.Config{Logger: log}})
	pod, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "u1"}})
	if _, err := p.Hook(abi.HookRequest{Point: abi.HookPostStart, Pod: pod, Container: json.RawMessage(`{"name":"c","image":"nginx"}`)}); err != nil {
		t.Fatal(err)
	}
	code := int32(137)
	if _, err := p.Hook(abi.HookRequest{Point: abi.HookPostStop, Pod: pod, Container: json.RawMessage(`{"name":"c","image":"nginx"}`), ExitCode: &code, Reason: "OOMKilled"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "audit: PostStart pod default/web uid u1 container c image nginx") || !strings.Contains(out, "plugin.audit") {
		t.Fatalf("host log lacks the audit line:\n%s", out)
	}
	if !strings.Contains(out, "audit: PostStop pod default/web uid u1 container c image nginx exit code 137 reason OOMKilled") {
		t.Fatalf("host log lacks the PostStop line with exit code and reason:\n%s", out)
	}
}
