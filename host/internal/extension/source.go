package extension

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// Sources returns a config.Source for every source plugin serving now, named
// after the plugin, for the pod config's Sources (so each counts towards
// SeenAllSources). Call it after the Manager's first Scan. Source plugins
// that appear later are polled by Run.
func (e *Extension) Sources() []config.Source {
	var out []config.Source
	for _, p := range e.mgr.Sources() {
		if e.claim(p.Name()) {
			out = append(out, &source{e: e, name: p.Name()})
		}
	}
	return out
}

// source is one source plugin as a config.Source.
type source struct {
	e    *Extension
	name string
}

// Name is the plugin's name.
func (s *source) Name() string { return s.name }

// Run polls the plugin until ctx is done.
func (s *source) Run(ctx context.Context, updates chan<- config.PodUpdate) error {
	s.e.poll(ctx, s.name, func(u config.PodUpdate) bool {
		select {
		case updates <- u:
			return true
		case <-ctx.Done():
			return false
		}
	})
	return ctx.Err()
}

// poll polls the source plugin named name and sends its updates until ctx is
// done. A failed poll (trap, timeout, garbage, an error answer, a pod that
// does not decode) sends nothing: the source keeps its last good state. A
// plugin that is unloaded keeps its pods too; polling resumes when a plugin
// of that name serves again.
func (e *Extension) poll(ctx context.Context, name string, send func(config.PodUpdate) bool) {
	var cur *pluginhost.Plugin
	var seq uint64
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		interval := e.cfg.PollInterval
		p := e.mgr.Get(name)
		mf := abi.Manifest{}
		if p != nil {
			mf = p.Manifest()
		}
		if p == nil || !mf.HasKind(abi.KindSource) {
			wait.Reset(interval)
			continue
		}
		if p != cur {
			cur, seq = p, 0
		}
		if v, ok := mf.Config[PollIntervalKey]; ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				interval = d
			}
		}
		seq++
		p, resp, err := retryClosed(e, p, func(p *pluginhost.Plugin) (*abi.SourceResponse, error) {
			return p.Source(ctx, &abi.SourceRequest{Seq: seq})
		})
		cur = p
		if ctx.Err() != nil {
			return
		}
		var ups []config.PodUpdate
		if err == nil {
			ups, err = e.decodeUpdates(name, resp.Updates)
		}
		if err != nil {
			e.failures.WithLabelValues(name, string(abi.KindSource), "keep").Inc()
			e.log.Error("source plugin poll failed; keeping its last good pods", "plugin", name, "seq", seq, "error", err)
		} else {
			for _, u := range ups {
				if !send(u) {
					return
				}
			}
			if resp.NextPollMillis > 0 {
				interval = time.Duration(resp.NextPollMillis) * time.Millisecond
			}
		}
		wait.Reset(interval)
	}
}

// decodeUpdates turns a plugin's updates into static pods, as the kubelet's
// URL source does: a UID that is the config hash (unless given), the node
// name as a name suffix, spec.nodeName, namespace "default" when empty, the
// API defaults. One pod that does not decode fails the whole poll: dropping
// it from a SET would kill it.
func (e *Extension) decodeUpdates(name string, in []abi.PodUpdate) ([]config.PodUpdate, error) {
	out := make([]config.PodUpdate, 0, len(in))
	for i, u := range in {
		op, ok := opFromABI(u.Op)
		if !ok {
			return nil, fmt.Errorf("plugin %q: update %d: unknown op %q", name, i, u.Op)
		}
		cu := config.PodUpdate{Op: op, Source: name, Pods: make([]*v1.Pod, 0, len(u.Pods))}
		for j, raw := range u.Pods {
			pod := &v1.Pod{}
			if err := json.Unmarshal(raw, pod); err != nil {
				return nil, fmt.Errorf("plugin %q: update %d pod %d: %w", name, i, j, err)
			}
			if pod.Name == "" {
				return nil, fmt.Errorf("plugin %q: update %d pod %d: metadata.name is empty", name, i, j)
			}
			if err := config.ApplyStaticDefaults(pod, config.StaticOptions{NodeName: e.cfg.NodeName, Location: "plugin:" + name}); err != nil {
				return nil, fmt.Errorf("plugin %q: pod %s: %w", name, pod.Name, err)
			}
			cu.Pods = append(cu.Pods, pod)
		}
		out = append(out, cu)
	}
	return out, nil
}
