package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
)

// Load one plugin (a bare module here; a *.plugin.yaml works the same) and
// ask it about a pod.
func ExampleLoad() {
	ctx := context.Background()
	p, err := plugin.Load(ctx, plugin.LoadConfig{
		Path:         "../internal/pluginhost/testdata/wat/ok.wasm",
		PluginConfig: map[string]string{"mode": "strict"}, // merged over the manifest's config
		Config:       plugin.Config{Timeout: 100 * time.Millisecond},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	resp, err := p.Admit(ctx, &abi.AdmitRequest{Pod: []byte(`{"metadata":{"name":"web!"}}`)})
	fmt.Println(p.Name(), p.Manifest().Kinds, resp.Allowed, resp.Reason, err)
	// Output: ok [source admission hook] false Bang <nil>
}

// Failures wrap the package's sentinel errors; the caller applies the
// plugin's failure policy.
func ExamplePlugin_Admit_failure() {
	ctx := context.Background()
	p, err := plugin.Load(ctx, plugin.LoadConfig{Path: "../internal/pluginhost/testdata/wat/loop.wasm", Config: plugin.Config{Timeout: 20 * time.Millisecond}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	_, err = p.Admit(ctx, &abi.AdmitRequest{Pod: []byte(`{}`)})
	policy := p.Manifest().FailurePolicy
	fmt.Println(errors.Is(err, plugin.ErrTimeout), policy)
	// Output: true Fail
}
