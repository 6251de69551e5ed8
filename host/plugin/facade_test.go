package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/abi"
)

const wat = "../internal/pluginhost/testdata/wat/"

// TestConfig_host checks that every field of Config reaches the plugin
// host's field of the same name, unchanged.
func TestConfig_host(t *testing.T) {
	c := Config{
		CacheDir: "/cache", Logger: hclog.NewNullLogger(),
		NodeInfo: func(context.Context) (abi.NodeInfo, error) { return abi.NodeInfo{}, nil },
		Timeout:  time.Minute, PoolSize: 3, Deadline: DeadlineCloseOnDone,
	}
	from, to := reflect.ValueOf(c), reflect.ValueOf(c.host())
	for i := 0; i < from.NumField(); i++ {
		name := from.Type().Field(i).Name
		f, h := from.Field(i), to.FieldByName(name)
		switch {
		case !h.IsValid():
			t.Errorf("Config.%s: the plugin host's Config has no such field", name)
		case f.IsZero():
			t.Errorf("Config.%s: not set by the test", name)
		case f.Kind() == reflect.Func:
			if h.IsNil() {
				t.Errorf("Config.%s did not reach the plugin host", name)
			}
		case f.Kind() == reflect.Interface || f.Kind() == reflect.Pointer:
			if h.Interface() != f.Interface() {
				t.Errorf("Config.%s = %v reached the plugin host as %v", name, f, h)
			}
		case f.Kind() == reflect.String:
			if h.String() != f.String() {
				t.Errorf("Config.%s = %q reached the plugin host as %q", name, f.String(), h.String())
			}
		default:
			if !reflect.DeepEqual(h.Interface(), f.Interface()) {
				t.Errorf("Config.%s = %v reached the plugin host as %v", name, f, h)
			}
		}
	}
}

// TestPlugin runs each method of a loaded plugin once.
func TestPlugin(t *testing.T) {
	ctx := context.Background()
	nodeInfo := make(chan struct{}, 1)
	p, err := Load(ctx, LoadConfig{Path: wat + "ok.wasm", PluginConfig: map[string]string{"k": "v"}, Config: Config{
		PoolSize: 1, Deadline: DeadlineMeter,
		NodeInfo: func(context.Context) (abi.NodeInfo, error) { nodeInfo <- struct{}{}; return abi.NodeInfo{}, nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Manifest(); p.Name() != "ok" || m.Name != "ok" || m.Config["k"] != "v" || len(m.Kinds) != 3 {
		t.Errorf("Name %q, Manifest %+v", p.Name(), m)
	}
	if p.DeadlineMode() != DeadlineMeter {
		t.Errorf("DeadlineMode %q, want %q", p.DeadlineMode(), DeadlineMeter)
	}
	if r, err := p.Admit(ctx, &abi.AdmitRequest{Pod: json.RawMessage(`{"metadata":{"name":"a!"}}`)}); err != nil || r.Allowed || r.Reason != "Bang" {
		t.Errorf("Admit = %+v, %v; want denied Bang", r, err)
	}
	if r, err := p.Source(ctx, &abi.SourceRequest{Seq: 1}); err != nil || len(r.Updates) != 1 {
		t.Errorf("Source = %+v, %v", r, err)
	}
	if r, err := p.Hook(ctx, &abi.HookRequest{Point: abi.HookPreCreate, Pod: json.RawMessage(`{}`)}); err != nil || r.Adjustment == nil {
		t.Errorf("Hook = %+v, %v", r, err)
	}
	if out, err := p.Call(ctx, abi.KindAdmission, []byte(`{}`)); err != nil || string(out) != `{"allowed":true}` {
		t.Errorf("Call = %s, %v", out, err)
	}
	var names []string
	for _, f := range p.Exports() {
		names = append(names, f.Name)
	}
	want := []string{abi.ExportVersionV1, abi.ExportAdmit, abi.ExportAlloc, abi.ExportHook, abi.ExportSource}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("Exports %v, want %v", names, want)
	}
	if imports := p.Imports(); len(imports) != 0 {
		t.Errorf("Imports %+v, want none", imports)
	}
	p.Close(ctx)
	if _, err := p.Admit(ctx, &abi.AdmitRequest{Pod: json.RawMessage(`{}`)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Admit after Close = %v, want ErrClosed", err)
	}

	held, err := Load(ctx, LoadConfig{Path: wat + "held.wasm", Config: Config{Timeout: 50 * time.Millisecond,
		NodeInfo: func(context.Context) (abi.NodeInfo, error) { nodeInfo <- struct{}{}; return abi.NodeInfo{}, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	if want := []Function{{Module: abi.ImportModule, Name: abi.ImportNodeInfo, Params: []string{"i32", "i32"}, Results: []string{"i32"}}}; !reflect.DeepEqual(held.Imports(), want) {
		t.Errorf("Imports %+v, want %+v", held.Imports(), want)
	}
	if _, err := held.Admit(ctx, &abi.AdmitRequest{Pod: json.RawMessage(`{}`)}); !errors.Is(err, ErrTimeout) {
		t.Errorf("Admit = %v, want ErrTimeout", err)
	}
	select {
	case <-nodeInfo:
	default:
		t.Error("Config.NodeInfo was not asked")
	}
}

// TestLoad_error checks that a failed load wraps the host's sentinel.
func TestLoad_error(t *testing.T) {
	if _, err := Load(context.Background(), LoadConfig{Path: "../internal/pluginhost/testdata/bad.wasm"}); !errors.Is(err, ErrCompile) {
		t.Fatalf("Load = %v, want ErrCompile", err)
	}
}
