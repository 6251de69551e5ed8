package agent

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/extension"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// plugins is the agent's plugin directory: the Manager that loads and
// reloads it and the Extension that wires its plugins into the pod config,
// the admission chain, the runtime's hooks and /plugins.
type plugins struct {
	mgr *pluginhost.Manager
	ext *extension.Extension
}

// newPlugins loads cfg.PluginDir once (so the source plugins present at start
// are sources of the pod config, counted by SeenAllSources); Run watches it
// afterwards. It returns nil without a plugin directory.
func (a *Agent) newPlugins() (*plugins, error) {
	if a.cfg.PluginDir == "" {
		return nil, nil
	}
	idle := a.cfg.PluginIdleTimeout.Duration
	if idle == 0 {
		idle = -1 // pluginhost.Config: negative keeps plugins loaded
	}
	mgr, err := pluginhost.NewManager(pluginhost.Config{
		Dir:         a.cfg.PluginDir,
		IdleTimeout: idle,
		CacheDir:    filepath.Join(a.cfg.RootDir, "plugin-cache"),
		Logger:      a.log,
		Registerer:  a.reg,
		NodeInfo:    a.nodeInfo,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: plugins: %w", err)
	}
	mgr.Scan(context.Background())
	ext, err := extension.New(extension.Config{
		Manager:  mgr,
		NodeName: a.cfg.NodeName,
		Merge: func(ctx context.Context, source string, u config.PodUpdate) error {
			return a.podConfig.Merge(ctx, source, u)
		},
		Recorder:   a.cluster, // nil-safe: standalone, no events
		Logger:     a.log.Named("extension"),
		Registerer: a.reg,
	})
	if err != nil {
		mgr.Close(context.Background())
		return nil, fmt.Errorf("agent: plugins: %w", err)
	}
	return &plugins{mgr: mgr, ext: ext}, nil
}

// nodeInfo serves the plugins' node_info import from the node object.
func (a *Agent) nodeInfo(context.Context) (abi.NodeInfo, error) {
	n := a.node.Load()
	if n == nil {
		return abi.NodeInfo{Name: a.cfg.NodeName}, nil
	}
	ni := abi.NodeInfo{Name: n.Name, Labels: n.Labels, Capacity: map[string]string{}, Allocatable: map[string]string{}}
	for k, q := range n.Status.Capacity {
		ni.Capacity[string(k)] = q.String()
	}
	for k, q := range n.Status.Allocatable {
		ni.Allocatable[string(k)] = q.String()
	}
	return ni, nil
}

// sources are the source plugins present at start, as pod config sources.
func (p *plugins) sources() []config.Source {
	if p == nil {
		return nil
	}
	return p.ext.Sources()
}

// start runs the directory watcher and the late source poller.
func (p *plugins) start(spawn func(string, func(context.Context) error)) {
	if p == nil {
		return
	}
	spawn("plugin manager", p.mgr.Run)
	spawn("plugin sources", p.ext.Run)
}

// hooks are the runtime's hooks: the hook plugins, or none.
func (p *plugins) hooks() container.Hooks {
	if p == nil {
		return nil
	}
	return p.ext
}

// admitters are the admission chain's admitters after the built-ins: the
// admission plugins as one admitter, or none.
func (p *plugins) admitters() []admission.Admitter {
	if p == nil {
		return nil
	}
	return []admission.Admitter{p.ext.Admitter()}
}

// handlers are the read-only server's extra handlers: /plugins.
func (p *plugins) handlers() map[string]http.Handler {
	if p == nil {
		return nil
	}
	return map[string]http.Handler{"/plugins": p.ext.Handler()}
}
