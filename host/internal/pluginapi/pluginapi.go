// Package pluginapi makes a node follow the cluster's WasmletPlugins: it
// watches them (one informer), keeps those whose node selector matches the
// node's labels as reference manifests in a directory of its own
// (<root-dir>/plugins-api, which the plugin Manager loads as its lower
// directory), and reports what the node enforces in the WasmletNode of the
// node's name — created once, its status updated only when it changes.
//
// The directory persists: an agent started with the API server down
// enforces what it last wrote (and pluginfetch last verified). Nothing is
// written or removed until the informer has synced and the node's labels
// are known, so an unreachable API server changes nothing enforced.
package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// DefaultRecheck is how often the node's labels and its report are looked
// at again besides the events that trigger them (local work only: the
// report is written when it changed).
const DefaultRecheck = 10 * time.Second

// Config configures a Follower.
type Config struct {
	// Client reads WasmletPlugins and writes the WasmletNode, with the
	// node's credentials.
	Client dynamic.Interface
	// NodeName names the node and its WasmletNode.
	NodeName string
	// Labels returns the node's labels as the API server has them; false
	// while they are not known yet.
	Labels func() (map[string]string, bool)
	// Dir is the managed directory of reference manifests
	// (<root-dir>/plugins-api).
	Dir string
	// Plugins lists the Manager's plugin files (pluginhost.Manager.Plugins).
	Plugins func() []pluginhost.Info
	// OnChange runs after Dir changed (the Manager's Rescan); may be nil.
	OnChange func()
	// Recheck is how often labels and the report are looked at besides
	// events; default DefaultRecheck.
	Recheck time.Duration
	// Now is the clock of the report's updateTime; default time.Now.
	Now func() time.Time
	// Logger receives the follower's logs; nil discards.
	Logger hclog.Logger
}

// Follower keeps a node's managed plugin directory in line with the
// cluster's WasmletPlugins and reports the node's plugins.
type Follower struct {
	cfg      Config
	informer cache.SharedIndexInformer
	kick     chan struct{}

	// Run's own: the first directory pass is done; changes not taken up
	// yet by when they were first seen; the timer that wakes Run for the
	// next turn.
	looked  bool
	pending map[string]time.Time
	wake    *time.Timer

	mu       sync.Mutex
	refused  map[string]string    // WasmletPlugin name → why it was not written
	waiting  map[string]time.Time // WasmletPlugin name → when its change is taken up
	sent     *pluginsv1.WasmletNodeStatus
	exists   bool // the WasmletNode exists (created or seen)
	lastSent time.Time
}

// New makes a Follower and its managed directory; nothing is watched
// until Run.
func New(cfg Config) (*Follower, error) {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.Dir == "" || cfg.Labels == nil || cfg.Plugins == nil {
		return nil, errors.New("plugin api: Config needs Client, NodeName, Dir, Labels and Plugins")
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("plugin api: %w", err)
	}
	f := &Follower{cfg: cfg, kick: make(chan struct{}, 1), refused: map[string]string{}, pending: map[string]time.Time{}}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(cfg.Client, 0)
	f.informer = factory.ForResource(pluginsv1.WasmletPlugins).Informer()
	_, err := f.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.Kick() },
		UpdateFunc: func(any, any) { f.Kick() },
		DeleteFunc: func(any) { f.Kick() },
	})
	if err != nil {
		return nil, fmt.Errorf("plugin api: %w", err)
	}
	// A failed list or watch (a cluster without deploy/'s CRDs, RBAC not
	// applied, the API server away) is logged here rather than only to
	// klog; the reflector tries again with its back-off (800 ms doubling
	// to 30 s), and the plugin directory is left as it is meanwhile.
	err = f.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		f.cfg.Logger.Warn("WasmletPlugins cannot be listed or watched; trying again with back-off (are deploy/'s CRDs and RBAC applied?)",
			"resource", pluginsv1.WasmletPlugins.String(), "error", err)
	})
	if err != nil {
		return nil, fmt.Errorf("plugin api: %w", err)
	}
	return f, nil
}

// Kick asks Run to bring the directory and the report up to date soon; it
// never blocks (the Manager's OnChange calls it).
func (f *Follower) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Run watches the WasmletPlugins and keeps the directory and the report up
// to date until ctx is done.
func (f *Follower) Run(ctx context.Context) error {
	go f.informer.Run(ctx.Done())
	go func() {
		// The events of the first list arrive before the informer counts
		// as synced; look again the moment it does, not at the recheck.
		if cache.WaitForCacheSync(ctx.Done(), f.informer.HasSynced) {
			f.Kick()
		}
	}()
	tick := time.NewTicker(f.cfg.Recheck)
	defer tick.Stop()
	defer func() {
		if f.wake != nil {
			f.wake.Stop()
		}
	}()
	for {
		f.sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-f.kick:
		}
	}
}

// sync brings the directory in line (when the plugins and labels are
// known) and writes the report if it changed.
func (f *Follower) sync(ctx context.Context) {
	if f.informer.HasSynced() {
		if l, ok := f.cfg.Labels(); ok {
			if f.materialize(f.list(), l) {
				f.cfg.OnChange()
			}
		}
	}
	if err := f.report(ctx); err != nil {
		f.cfg.Logger.Warn("plugin report not written; trying again", "wasmletnode", f.cfg.NodeName, "error", err)
	}
}

// list is the informer's WasmletPlugins; one that does not convert is
// recorded as refused.
func (f *Follower) list() []pluginsv1.WasmletPlugin {
	var out []pluginsv1.WasmletPlugin
	for _, o := range f.informer.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var p pluginsv1.WasmletPlugin
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			f.mu.Lock()
			f.refused[u.GetName()] = fmt.Sprintf("WasmletPlugin %s: %v", u.GetName(), err)
			f.mu.Unlock()
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Selects reports whether p's node selector matches the node's labels.
func Selects(p *pluginsv1.WasmletPlugin, l map[string]string) (bool, error) {
	if p.Spec.NodeSelector == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	if err != nil {
		return false, fmt.Errorf("WasmletPlugin %s: spec.nodeSelector: %w", p.Name, err)
	}
	return s.Matches(labels.Set(l)), nil
}

// sameStatus compares two reports without their updateTime.
func sameStatus(a, b *pluginsv1.WasmletNodeStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.UpdateTime, y.UpdateTime = nil, nil
	return equality.Semantic.DeepEqual(x, y)
}

// errorOf is a plugin file's error for the report: the load error, else
// the last resolution's.
func errorOf(in pluginhost.Info) string {
	if in.Error != "" {
		return in.Error
	}
	return in.ResolveError
}

// stem is a plugin file's name without its suffix.
func stem(path string) string {
	b := filepath.Base(path)
	for _, s := range []string{".plugin.yaml", ".wasm"} {
		if strings.HasSuffix(b, s) {
			return strings.TrimSuffix(b, s)
		}
	}
	return b
}

// isNotFound reports whether err is the API server's 404.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
