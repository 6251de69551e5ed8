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
	"github.com/wasmlet/wasmlet/host/internal/node"
	"github.com/wasmlet/wasmlet/host/internal/pluginapi"
	"github.com/wasmlet/wasmlet/host/internal/pluginfetch"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
	"github.com/wasmlet/wasmlet/host/internal/pluginsign"
)

// plugins is the agent's plugin directory: the Manager that loads and
// reloads it and the Extension that wires its plugins into the pod config,
// the admission chain, the runtime's hooks and /plugins.
type plugins struct {
	mgr    *pluginhost.Manager
	fetch  *pluginfetch.Fetcher
	ext    *extension.Extension
	follow *pluginapi.Follower // nil when standalone
	node   *node.Watcher       // the node's labels for follow; nil when standalone
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
	var mgr *pluginhost.Manager
	fetch, err := a.newPluginFetcher(func() { mgr.Rescan() })
	if err != nil {
		return nil, fmt.Errorf("agent: plugins: %w", err)
	}
	var apiDir string // the WasmletPlugins' manifests, on a node of a cluster
	if a.cluster != nil {
		apiDir = filepath.Join(a.cfg.RootDir, "plugins-api")
	}
	mgr, err = pluginhost.NewManager(pluginhost.Config{
		Dir:         a.cfg.PluginDir,
		LowerDir:    apiDir,
		IdleTimeout: idle,
		CacheDir:    filepath.Join(a.cfg.RootDir, "plugin-cache"),
		Logger:      a.log,
		Registerer:  a.reg,
		NodeInfo:    a.nodeInfo,
		Resolver:    fetch,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: plugins: %w", err)
	}
	var (
		follow *pluginapi.Follower
		nw     *node.Watcher
	)
	if apiDir != "" {
		nw = node.NewWatcher(a.cluster.Client(), a.cfg.NodeName)
		if follow, err = a.newPluginFollower(apiDir, mgr, nw); err != nil {
			mgr.Close(context.Background())
			return nil, fmt.Errorf("agent: plugins: %w", err)
		}
		mgr.OnChange(follow.Kick)
		nw.OnLabelsChange(follow.Kick)
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
	return &plugins{mgr: mgr, fetch: fetch, ext: ext, follow: follow, node: nw}, nil
}

// newPluginFollower makes what keeps dir in line with the cluster's
// WasmletPlugins selecting this node (its labels as nw sees them) and
// reports mgr's plugins in the node's WasmletNode.
func (a *Agent) newPluginFollower(dir string, mgr *pluginhost.Manager, nw *node.Watcher) (*pluginapi.Follower, error) {
	client, err := a.cluster.Dynamic()
	if err != nil {
		return nil, err
	}
	return pluginapi.New(pluginapi.Config{
		Client: client, NodeName: a.cfg.NodeName, Dir: dir, Plugins: mgr.Plugins, OnChange: mgr.Rescan,
		Labels: func() (map[string]string, bool) {
			n, ok := nw.Node()
			if !ok {
				return nil, false
			}
			return n.Labels, true
		},
		Logger: a.log.Named("pluginapi"),
	})
}

// newPluginFetcher makes what pulls the plugins of reference manifests
// (image: in a manifest) into <root-dir>/plugins, with the registry
// credentials and CA of the configuration; onChange is the Manager's
// Rescan.
func (a *Agent) newPluginFetcher(onChange func()) (*pluginfetch.Fetcher, error) {
	occfg := pluginoci.Config{CAFile: a.cfg.PluginRegistryCA, UserAgent: "wasmlet/" + Version}
	if a.cfg.PluginRegistryConfig != "" {
		kc, err := pluginoci.KeychainFromDockerConfigFile(a.cfg.PluginRegistryConfig)
		if err != nil {
			return nil, err
		}
		occfg.Keychain = kc
	}
	client, err := pluginoci.New(occfg)
	if err != nil {
		return nil, err
	}
	// Signatures are checked against the node's policy (when given) and
	// each plugin's own verification field.
	var policy *pluginsign.NodePolicy
	if a.cfg.PluginVerificationPolicy != "" {
		if policy, err = pluginsign.LoadNodePolicy(a.cfg.PluginVerificationPolicy); err != nil {
			return nil, err
		}
	}
	verifier, err := pluginsign.New(pluginsign.Config{Registry: client, Policy: policy})
	if err != nil {
		return nil, fmt.Errorf("plugin verification policy %s: %w", a.cfg.PluginVerificationPolicy, err)
	}
	return pluginfetch.New(pluginfetch.Config{
		Dir:             filepath.Join(a.cfg.RootDir, "plugins"),
		Client:          client,
		Verifier:        verifier,
		PolicyFile:      a.cfg.PluginVerificationPolicy,
		ResolveInterval: a.cfg.PluginResolveInterval.Duration,
		OnChange:        onChange,
		Logger:          a.log.Named("pluginfetch"),
		Registerer:      a.reg,
	})
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
	spawn("plugin fetch", p.fetch.Run)
	if p.follow != nil {
		spawn("node watch", p.node.Run)
		spawn("plugin api", p.follow.Run)
	}
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
