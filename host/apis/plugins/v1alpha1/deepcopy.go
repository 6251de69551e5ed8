package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
)

// DeepCopyInto copies p into out.
func (p *WasmletPlugin) DeepCopyInto(out *WasmletPlugin) {
	*out = *p
	out.TypeMeta = p.TypeMeta
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a copy of p.
func (p *WasmletPlugin) DeepCopy() *WasmletPlugin {
	if p == nil {
		return nil
	}
	out := new(WasmletPlugin)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *WasmletPlugin) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *WasmletPluginSpec) DeepCopyInto(out *WasmletPluginSpec) {
	*out = *s
	if s.Verification != nil {
		v := *s.Verification
		v.Keys = slices.Clone(v.Keys)
		v.Keyless = slices.Clone(v.Keyless)
		out.Verification = &v
	}
	if s.Config != nil {
		out.Config = make(map[string]string, len(s.Config))
		for k, v := range s.Config {
			out.Config[k] = v
		}
	}
	out.Permissions.AllowedHosts = slices.Clone(s.Permissions.AllowedHosts)
	out.Permissions.Adjust = slices.Clone(s.Permissions.Adjust)
	out.Permissions.HostPaths = slices.Clone(s.Permissions.HostPaths)
	out.NodeSelector = s.NodeSelector.DeepCopy()
	if s.Rollout != nil {
		r := *s.Rollout
		out.Rollout = &r
	}
}

// DeepCopyInto copies l into out.
func (l *WasmletPluginList) DeepCopyInto(out *WasmletPluginList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]WasmletPlugin, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *WasmletPluginList) DeepCopyObject() runtime.Object {
	out := new(WasmletPluginList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies n into out.
func (n *WasmletNode) DeepCopyInto(out *WasmletNode) {
	*out = *n
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Plugins = slices.Clone(n.Status.Plugins)
	for i := range out.Status.Plugins {
		out.Status.Plugins[i].WaitingUntil = out.Status.Plugins[i].WaitingUntil.DeepCopy()
	}
	out.Status.UpdateTime = n.Status.UpdateTime.DeepCopy()
}

// DeepCopy returns a copy of n.
func (n *WasmletNode) DeepCopy() *WasmletNode {
	if n == nil {
		return nil
	}
	out := new(WasmletNode)
	n.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (n *WasmletNode) DeepCopyObject() runtime.Object { return n.DeepCopy() }

// DeepCopyInto copies l into out.
func (l *WasmletNodeList) DeepCopyInto(out *WasmletNodeList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]WasmletNode, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *WasmletNodeList) DeepCopyObject() runtime.Object {
	out := new(WasmletNodeList)
	l.DeepCopyInto(out)
	return out
}
