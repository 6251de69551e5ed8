package extension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

var _ container.Hooks = (*Extension)(nil)

// Hook calls every hook plugin serving now whose manifest subscribes to
// point, in manifest order (it implements container.Hooks). At PreSandbox
// and PreCreate each plugin's adjustment is checked against its manifest's
// permissions — an undeclared field is a failed call naming the plugin, the
// pod and the field, under the plugin's failure policy — and merged in
// order: two plugins setting one item to different values, or one removing
// what another added, is a conflict that fails the step naming both,
// whatever their failure policies. A failed call under policy Fail stops
// there and returns an error naming the plugin; under Ignore it is logged,
// counted and skipped (with its whole adjustment).
func (e *Extension) Hook(ctx context.Context, point container.HookPoint, pod *v1.Pod, c *v1.Container) (*container.Adjustment, error) {
	ap, ok := hookPointToABI(point)
	if !ok {
		return nil, fmt.Errorf("hook point %q has no ABI equivalent", point)
	}
	ps := e.subscribers(ap)
	if len(ps) == 0 {
		return nil, nil
	}
	req, err := hookRequest(ap, pod, c)
	if err != nil {
		return nil, err
	}
	adjusts := ap == abi.HookPreSandbox || ap == abi.HookPreCreate
	var m merger
	for _, p := range ps {
		p, resp, err := e.callHook(ctx, p, req, pod, c)
		if err != nil {
			return nil, err
		}
		if resp == nil || !adjusts || resp.Adjustment == nil {
			continue
		}
		mf, adj := p.Manifest(), honouredAt(ap, resp.Adjustment)
		if err := permit(&mf, adj); err != nil {
			err = fmt.Errorf("hook plugin %s, pod %s: %w", p.Name(), podspec.Name(pod), err)
			if e.failed(p, abi.KindHook, e.what(point, pod, c), err) {
				return nil, fmt.Errorf("hook plugin %s refused (failurePolicy Fail): %w", p.Name(), err)
			}
			continue
		}
		if err := m.add(p.Name(), adj); err != nil {
			return nil, fmt.Errorf("%s %s: %w", point, e.what(point, pod, c), err)
		}
	}
	adj, owners := m.result()
	return adjustmentFromABI(adj, owners), nil
}

// Validate calls every hook plugin subscribed to Validate with c's final
// CRI config; the first refusal is returned as an error naming the plugin
// and carrying its message. A failed call follows the plugin's failure
// policy.
func (e *Extension) Validate(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig, adj *container.Adjustment) error {
	ps := e.subscribers(abi.HookValidate)
	if len(ps) == 0 {
		return nil
	}
	req, err := hookRequest(abi.HookValidate, pod, c)
	if err != nil {
		return err
	}
	req.Config = containerConfigToABI(cfg, adj)
	for _, p := range ps {
		p, resp, err := e.callHook(ctx, p, req, pod, c)
		if err != nil {
			return err
		}
		if resp != nil && resp.Refuse != "" {
			e.log.Info("hook plugin refused a container", "plugin", p.Name(), "pod", podspec.Name(pod), "container", c.Name, "message", resp.Refuse)
			return &RefusedError{Plugin: p.Name(), Message: resp.Refuse}
		}
	}
	return nil
}

// RefusedError is a validating hook's refusal of a container.
type RefusedError struct {
	// Plugin is the refusing plugin's name.
	Plugin string
	// Message is the plugin's reason.
	Message string
}

func (r *RefusedError) Error() string {
	return fmt.Sprintf("hook plugin %s refused the container: %s", r.Plugin, r.Message)
}

// PreUpdate calls every hook plugin subscribed to PreUpdate with the
// resources c is being changed to. A failed call follows the plugin's
// failure policy.
func (e *Extension) PreUpdate(ctx context.Context, pod *v1.Pod, c *v1.Container, resources *runtimeapi.LinuxContainerResources) error {
	ps := e.subscribers(abi.HookPreUpdate)
	if len(ps) == 0 {
		return nil
	}
	req, err := hookRequest(abi.HookPreUpdate, pod, c)
	if err != nil {
		return err
	}
	req.Resources = resourcesToABI(resources)
	for _, p := range ps {
		if _, _, err := e.callHook(ctx, p, req, pod, c); err != nil {
			return err
		}
	}
	return nil
}

// PostStop calls every hook plugin subscribed to PostStop with how c
// exited. A failed call follows the plugin's failure policy; the error is
// for the caller's log.
func (e *Extension) PostStop(ctx context.Context, pod *v1.Pod, c *v1.Container, exit container.Exit) error {
	ps := e.subscribers(abi.HookPostStop)
	if len(ps) == 0 {
		return nil
	}
	req, err := hookRequest(abi.HookPostStop, pod, c)
	if err != nil {
		return err
	}
	req.ExitCode, req.Reason = exit.Code, exit.Reason
	var errs []error
	for _, p := range ps {
		if _, _, err := e.callHook(ctx, p, req, pod, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Subscribed reports whether a hook plugin serving now is called at point.
func (e *Extension) Subscribed(point container.HookPoint) bool {
	ap, ok := hookPointToABI(point)
	return ok && len(e.subscribers(ap)) > 0
}

// subscribers are the hook plugins serving now that are called at point,
// in order.
func (e *Extension) subscribers(point abi.HookPoint) []*pluginhost.Plugin {
	var out []*pluginhost.Plugin
	for _, p := range e.mgr.Hooks() {
		if m := p.Manifest(); m.CallsAt(point) {
			out = append(out, p)
		}
	}
	return out
}

// hookRequest is the request at point for pod and c (nil at pod points).
func hookRequest(point abi.HookPoint, pod *v1.Pod, c *v1.Container) (*abi.HookRequest, error) {
	req := &abi.HookRequest{Point: point}
	var err error
	if req.Pod, err = json.Marshal(pod); err != nil {
		return nil, fmt.Errorf("%s hook: encode pod %s: %w", point, podspec.Name(pod), err)
	}
	if c != nil {
		if req.Container, err = json.Marshal(c); err != nil {
			return nil, fmt.Errorf("%s hook: encode container %s: %w", point, c.Name, err)
		}
	}
	return req, nil
}

// callHook calls p with req. A failed call is logged and counted; it
// returns an error naming the plugin only under policy Fail, and a nil
// response under Ignore.
func (e *Extension) callHook(ctx context.Context, p *pluginhost.Plugin, req *abi.HookRequest, pod *v1.Pod, c *v1.Container) (*pluginhost.Plugin, *abi.HookResponse, error) {
	p, resp, err := retryClosed(e, p, func(p *pluginhost.Plugin) (*abi.HookResponse, error) { return p.Hook(ctx, req) })
	if err == nil {
		return p, resp, nil
	}
	point, _ := hookPointFromABI(req.Point)
	if e.failed(p, abi.KindHook, e.what(point, pod, c), err) {
		return p, nil, fmt.Errorf("hook plugin %s failed (failurePolicy Fail): %w", p.Name(), firstLine(err))
	}
	return p, nil, nil
}

// what names a hook call for the log: point, pod and container.
func (e *Extension) what(point container.HookPoint, pod *v1.Pod, c *v1.Container) string {
	what := string(point) + " " + podspec.Name(pod)
	if c != nil {
		what += " container " + c.Name
	}
	return what
}
