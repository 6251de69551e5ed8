package extension

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

var _ container.Hooks = (*Extension)(nil)

// Hook calls every hook plugin serving now, in manifest order, at point
// (it implements container.Hooks). Their adjustments are merged in that order
// (a later plugin's env variable, label or annotation replaces an earlier
// one's of the same name); adjustments are only returned at PreSandbox and
// PreCreate, where the ABI honours them. A failed call under policy Fail
// stops there and returns an error naming the plugin; under Ignore it is
// logged, counted and skipped.
func (e *Extension) Hook(ctx context.Context, point container.HookPoint, pod *v1.Pod, c *v1.Container) (*container.Adjustment, error) {
	ps := e.mgr.Hooks()
	if len(ps) == 0 {
		return nil, nil
	}
	ap, ok := hookPointToABI(point)
	if !ok {
		return nil, fmt.Errorf("hook point %q has no ABI equivalent", point)
	}
	req := &abi.HookRequest{Point: ap}
	var err error
	if req.Pod, err = json.Marshal(pod); err != nil {
		return nil, fmt.Errorf("%s hook: encode pod %s: %w", point, podspec.Name(pod), err)
	}
	if c != nil {
		if req.Container, err = json.Marshal(c); err != nil {
			return nil, fmt.Errorf("%s hook: encode container %s: %w", point, c.Name, err)
		}
	}
	honoured := point == container.HookPreSandbox || point == container.HookPreCreate
	var out *abi.Adjustment
	for _, p := range ps {
		p, resp, err := retryClosed(e, p, func(p *pluginhost.Plugin) (*abi.HookResponse, error) { return p.Hook(ctx, req) })
		if err != nil {
			what := string(point) + " " + podspec.Name(pod)
			if c != nil {
				what += " container " + c.Name
			}
			if e.failed(p, abi.KindHook, what, err) {
				return nil, fmt.Errorf("hook plugin %s failed (failurePolicy Fail): %w", p.Name(), firstLine(err))
			}
			continue
		}
		if !honoured || resp.Adjustment == nil {
			continue
		}
		out = merge(out, resp.Adjustment, point == container.HookPreCreate)
	}
	return adjustmentFromABI(out, nil), nil
}

// merge lays b over a; env only for containers.
func merge(a, b *abi.Adjustment, env bool) *abi.Adjustment {
	if a == nil {
		a = &abi.Adjustment{}
	}
	if env {
		for _, v := range b.Env {
			replaced := false
			for i := range a.Env {
				if a.Env[i].Name == v.Name {
					a.Env[i].Value, replaced = v.Value, true
				}
			}
			if !replaced {
				a.Env = append(a.Env, v)
			}
		}
	}
	a.Labels = overlay(a.Labels, b.Labels)
	a.Annotations = overlay(a.Annotations, b.Annotations)
	return a
}

// overlay copies src into dst, making dst only when src has entries.
func overlay(dst, src map[string]string) map[string]string {
	if dst == nil && len(src) > 0 {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}
