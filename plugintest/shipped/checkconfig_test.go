package shipped

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/host/plugin"
	"github.com/wasmlet/wasmlet/plugintest"
)

// TestCheckConfig_Wasm loads the compiled image-allowlist and policy-bundle
// through wasmlet's plugin host with configs their wasmlet_check_config
// export (the SDK's, from sdk.ConfigChecker) accepts or refuses: a refusal
// fails the load with ErrConfigRefused naming the plugin and carrying the
// policy's message (in the bundle, prefixed with the policy's name).
func TestCheckConfig_Wasm(t *testing.T) {
	allowlist := plugintest.Build(t, "../../plugins/image-allowlist")
	bundle := plugintest.Build(t, "../../plugins/policy-bundle")
	tests := []struct {
		name   string
		wasm   string
		config map[string]string
		want   string // the refusal; "" accepts
	}{
		{"allowlist accepted", allowlist, map[string]string{"allowed": "registry.k8s.io, ghcr.io/acme/"}, ""},
		{"allowlist not set", allowlist, nil, `plugin "image-allowlist": config refused by the plugin: config allowed is not set`},
		{"allowlist URL", allowlist, map[string]string{"allowed": "https://ghcr.io"}, `config refused by the plugin: config allowed: entry "https://ghcr.io" is a URL`},
		{"allowlist digest", allowlist, map[string]string{"allowed": "ghcr.io/acme/app@sha256:00"}, "holds a digest"},
		{"bundle accepted", bundle, map[string]string{"image-allowlist.allowed": "ghcr.io"}, ""},
		{"bundle refused", bundle, map[string]string{"image-allowlist.allowed": "http://ghcr.io"},
			`plugin "policy-bundle": config refused by the plugin: image-allowlist: config allowed: entry "http://ghcr.io" is a URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := plugintest.TryLoad(plugin.LoadConfig{Path: tt.wasm, PluginConfig: tt.config})
			if err == nil {
				defer p.Close(context.Background())
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("load: %v, want the config accepted", err)
			case tt.want != "" && (!errors.Is(err, plugin.ErrConfigRefused) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("load: %v, want ErrConfigRefused with %q", err, tt.want)
			}
		})
	}
}
