package pluginapi

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	pluginsv1 "github.com/wasmlet/wasmlet/host/apis/plugins/v1alpha1"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// Status is the node's report now: every plugin file of the Manager (the
// WasmletPlugin's name for those of the managed directory) and every
// WasmletPlugin refused before it reached the directory, sorted by name.
func (f *Follower) Status() pluginsv1.WasmletNodeStatus {
	f.mu.Lock()
	refused := make(map[string]string, len(f.refused))
	for k, v := range f.refused {
		refused[k] = v
	}
	waiting := make(map[string]time.Time, len(f.waiting))
	for k, v := range f.waiting {
		waiting[k] = v
	}
	f.mu.Unlock()
	dir := filepath.Clean(f.cfg.Dir)
	var st pluginsv1.WasmletNodeStatus
	for _, in := range f.cfg.Plugins() {
		ps := pluginsv1.PluginStatus{
			Name: in.Name, Source: pluginsv1.SourceDirectory, Image: in.Image, Digest: in.Digest,
			Version: in.Version, Mode: in.Mode, Enforced: in.State == pluginhost.StateLoaded, Error: errorOf(in),
		}
		if ps.Name == "" {
			ps.Name = stem(in.Path)
		}
		if filepath.Dir(in.Path) == dir {
			ps.Source, ps.Name = pluginsv1.SourceAPI, stem(in.Path)
			ps.ObservedGeneration = generation(dir, ps.Name)
			if why, ok := refused[ps.Name]; ok {
				// A new generation refused here; the manifest written
				// before it still serves.
				ps.Error = why
				delete(refused, ps.Name)
			}
			if due, ok := waiting[ps.Name]; ok {
				ps.WaitingUntil = waitingUntil(due)
				delete(waiting, ps.Name)
			}
		}
		if ps.Enforced {
			st.Enforced++
		}
		st.Plugins = append(st.Plugins, ps)
	}
	for name, why := range refused {
		st.Plugins = append(st.Plugins, pluginsv1.PluginStatus{Name: name, Source: pluginsv1.SourceAPI, Error: why})
	}
	for name, due := range waiting {
		// A plugin new to the node, waiting for its turn.
		st.Plugins = append(st.Plugins, pluginsv1.PluginStatus{Name: name, Source: pluginsv1.SourceAPI, WaitingUntil: waitingUntil(due)})
	}
	sort.Slice(st.Plugins, func(i, j int) bool {
		a, b := st.Plugins[i], st.Plugins[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Source > b.Source // directory before api
	})
	return st
}

// waitingUntil is a turn's time as the report carries it: rounded up to
// the second, as the API server stores whole seconds.
func waitingUntil(t time.Time) *metav1.Time {
	m := metav1.NewTime(t.Add(time.Second - 1).Truncate(time.Second))
	return &m
}

// report writes the node's WasmletNode when its status differs from what
// was last written: a create the first time (when it does not exist), then
// merge patches of the status subresource.
func (f *Follower) report(ctx context.Context) error {
	st := f.Status()
	f.mu.Lock()
	same := f.exists && sameStatus(f.sent, &st)
	exists := f.exists
	f.mu.Unlock()
	if same {
		return nil
	}
	nodes := f.cfg.Client.Resource(pluginsv1.WasmletNodes)
	name := f.cfg.NodeName
	if !exists {
		u, err := nodes.Get(ctx, name, metav1.GetOptions{})
		switch {
		case isNotFound(err):
			obj := &pluginsv1.WasmletNode{
				TypeMeta:   metav1.TypeMeta{APIVersion: pluginsv1.SchemeGroupVersion.String(), Kind: "WasmletNode"},
				ObjectMeta: metav1.ObjectMeta{Name: name},
			}
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				return err
			}
			if _, err := nodes.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create WasmletNode %s: %w", name, err)
			}
		case err != nil:
			return fmt.Errorf("get WasmletNode %s: %w", name, err)
		default:
			var got pluginsv1.WasmletNode
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err == nil && sameStatus(&got.Status, &st) {
				f.mu.Lock()
				f.exists, f.sent = true, &got.Status
				f.mu.Unlock()
				return nil
			}
		}
		f.mu.Lock()
		f.exists = true
		f.mu.Unlock()
	}
	now := metav1.NewTime(f.cfg.Now())
	st.UpdateTime = &now
	patch, err := statusPatch(st)
	if err != nil {
		return err
	}
	if _, err := nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if isNotFound(err) {
			f.mu.Lock()
			f.exists = false
			f.mu.Unlock()
		}
		return fmt.Errorf("update WasmletNode %s status: %w", name, err)
	}
	f.mu.Lock()
	f.sent = &st
	f.mu.Unlock()
	f.cfg.Logger.Info("plugin report written", "wasmletnode", name, "plugins", len(st.Plugins), "enforced", st.Enforced)
	return nil
}

// statusPatch is the merge patch that sets the status to st: its plugins
// list written whole, an empty one too (which omitempty would leave out,
// keeping the old list).
func statusPatch(st pluginsv1.WasmletNodeStatus) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if _, ok := m["plugins"]; !ok {
		m["plugins"] = []any{}
	}
	return json.Marshal(map[string]any{"status": m})
}
