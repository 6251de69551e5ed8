// Command device-injector is containerd NRI's sample device-injector
// ported to a wasmlet hook: at PreCreate it adds the devices, mounts and
// CDI devices a pod's annotations ask for to the container being created.
// A pod without these annotations is left alone.
//
// The annotation keys are NRI's, looked up in this order for container C
// (the first present wins):
//
//	devices.nri.io/container.C, devices.nri.io/pod, devices.nri.io
//	mounts.nri.io/container.C,  mounts.nri.io/pod,  mounts.nri.io
//	cdi-devices.nri.io/container.C, cdi-devices.nri.io/pod, cdi-devices.nri.io
//
// Their values are YAML lists:
//
//	devices.nri.io/container.app: |
//	  - path: /dev/fuse          # the path in the container
//	    hostPath: /dev/fuse      # the host's device node; default path
//	    permissions: rw          # cgroup permissions, of "rwm"; default rwm
//	mounts.nri.io/pod: |
//	  - source: /srv/models      # a host path
//	    destination: /models
//	    type: bind               # optional; only bind
//	    options: [ro, rslave]    # ro/rw, bind/rbind, [r]private/[r]slave/[r]shared
//	cdi-devices.nri.io/container.app: |
//	  - vendor.com/gpu=0
//
// Where NRI creates a device node from a type and numbers, the CRI can only
// pass a host's device node through: a device that gives major, minor,
// file_mode, uid or gid is an error naming the annotation, as is a mount
// type or option the CRI cannot express. The manifest grants devices,
// mounts and cdiDevices, and the host paths they may use
// (permissions.hostPaths); the host refuses anything else.
package main

import (
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v2"

	"github.com/wasmlet/wasmlet/sdk"
)

// The annotation key prefixes, NRI's.
const (
	deviceKey = "devices.nri.io"
	mountKey  = "mounts.nri.io"
	cdiKey    = "cdi-devices.nri.io"
)

type injector struct{}

// Hook answers PreCreate with the annotated devices, mounts and CDI devices.
func (injector) Hook(req sdk.HookRequest) (sdk.Adjustment, error) {
	var adj sdk.Adjustment
	if req.Point != sdk.HookPreCreate || req.Container == nil || len(req.Pod.Annotations) == 0 {
		return adj, nil
	}
	if err := Inject(&adj, req.Pod.Annotations, req.Container.Name); err != nil {
		return sdk.Adjustment{}, fmt.Errorf("pod %s/%s container %s: %w", req.Pod.Namespace, req.Pod.Name, req.Container.Name, err)
	}
	return adj, nil
}

// Inject adds to adj what annotations ask for container ctr.
func Inject(adj *sdk.Adjustment, annotations map[string]string, ctr string) error {
	err := each(annotations, deviceKey, ctr, "device", func(d device) error {
		dev, err := d.toSDK()
		if err == nil {
			adj.AddDevice(dev)
		}
		return err
	})
	if err == nil {
		err = each(annotations, mountKey, ctr, "mount", func(m mount) error {
			mt, err := m.toSDK()
			if err == nil {
				adj.AddMount(mt)
			}
			return err
		})
	}
	if err == nil {
		err = each(annotations, cdiKey, ctr, "CDI device", func(n string) error {
			if kind, name, ok := strings.Cut(n, "="); !ok || !strings.Contains(kind, "/") || name == "" {
				return fmt.Errorf("%q: want a fully qualified name, vendor.com/class=name", n)
			}
			adj.AddCDIDevice(n)
			return nil
		})
	}
	return err
}

// each reads the YAML list of Ts in the annotation for container ctr under
// prefix, if there is one, and calls add with each item; errors name the
// annotation and the item.
func each[T any](annotations map[string]string, prefix, ctr, what string, add func(T) error) error {
	key, value := lookup(annotations, prefix, ctr)
	if key == "" {
		return nil
	}
	var items []T
	if err := yaml.UnmarshalStrict([]byte(value), &items); err != nil {
		return fmt.Errorf("annotation %s: %v", key, err)
	}
	for i, item := range items {
		if err := add(item); err != nil {
			return fmt.Errorf("annotation %s: %s %d: %w", key, what, i, err)
		}
	}
	return nil
}

// lookup returns the first of prefix/container.ctr, prefix/pod and prefix
// that annotations hold, and its value; "" when none.
func lookup(annotations map[string]string, prefix, ctr string) (key, value string) {
	for _, k := range []string{prefix + "/container." + ctr, prefix + "/pod", prefix} {
		if v, ok := annotations[k]; ok {
			return k, v
		}
	}
	return "", ""
}

// device is an annotated device: NRI's fields, and hostPath and
// permissions, which the CRI has instead of NRI's numbers.
type device struct {
	Path        string  `yaml:"path"`
	HostPath    string  `yaml:"hostPath"`
	Permissions string  `yaml:"permissions"`
	Type        string  `yaml:"type"`
	Major       *int64  `yaml:"major"`
	Minor       *int64  `yaml:"minor"`
	FileMode    *uint32 `yaml:"file_mode"`
	UID         *uint32 `yaml:"uid"`
	GID         *uint32 `yaml:"gid"`
}

func (d device) toSDK() (sdk.Device, error) {
	var unset []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"major", d.Major != nil}, {"minor", d.Minor != nil}, {"file_mode", d.FileMode != nil}, {"uid", d.UID != nil}, {"gid", d.GID != nil}} {
		if f.set {
			unset = append(unset, f.name)
		}
	}
	if len(unset) > 0 {
		return sdk.Device{}, fmt.Errorf("%s: %s: the CRI passes a host's device node through (hostPath) and cannot create one from numbers, modes or owners", d.Path, strings.Join(unset, ", "))
	}
	if !path.IsAbs(d.Path) {
		return sdk.Device{}, fmt.Errorf("path %q: want an absolute path in the container", d.Path)
	}
	host := d.HostPath
	if host == "" {
		host = d.Path
	}
	if !path.IsAbs(host) {
		return sdk.Device{}, fmt.Errorf("hostPath %q: want an absolute path on the node", host)
	}
	switch d.Type {
	case "", "c", "b", "u":
	default:
		return sdk.Device{}, fmt.Errorf("%s: type %q: want c, b or u", d.Path, d.Type)
	}
	if strings.Trim(d.Permissions, "rwm") != "" {
		return sdk.Device{}, fmt.Errorf("%s: permissions %q: want letters of rwm", d.Path, d.Permissions)
	}
	dev := sdk.Device{HostPath: host, Permissions: d.Permissions}
	if d.Path != host {
		dev.ContainerPath = d.Path
	}
	return dev, nil
}

// mount is an annotated mount, NRI's fields.
type mount struct {
	Source      string   `yaml:"source"`
	Destination string   `yaml:"destination"`
	Type        string   `yaml:"type"`
	Options     []string `yaml:"options"`
}

// propagations maps the mount options of propagation to the CRI's.
var propagations = map[string]sdk.MountPropagation{
	"private": sdk.PropagationNone, "rprivate": sdk.PropagationNone,
	"slave": sdk.PropagationHostToContainer, "rslave": sdk.PropagationHostToContainer,
	"shared": sdk.PropagationBidirectional, "rshared": sdk.PropagationBidirectional,
}

func (m mount) toSDK() (sdk.Mount, error) {
	if m.Type != "" && m.Type != "bind" {
		return sdk.Mount{}, fmt.Errorf("%s: type %q: the CRI mounts host paths (bind) only", m.Destination, m.Type)
	}
	if !path.IsAbs(m.Source) || !path.IsAbs(m.Destination) {
		return sdk.Mount{}, fmt.Errorf("source %q, destination %q: want absolute paths", m.Source, m.Destination)
	}
	mt := sdk.Mount{HostPath: m.Source, ContainerPath: m.Destination}
	for _, o := range m.Options {
		switch p, ok := propagations[o]; {
		case ok:
			mt.Propagation = p
		case o == "ro":
			mt.ReadOnly = true
		case o == "rw":
			mt.ReadOnly = false
		case o == "bind" || o == "rbind":
		default:
			return sdk.Mount{}, fmt.Errorf("%s: option %q: the CRI has ro/rw and propagation ([r]private, [r]slave, [r]shared) only", m.Destination, o)
		}
	}
	if mt.Propagation == sdk.PropagationNone {
		mt.Propagation = ""
	}
	return mt, nil
}

// init registers the hook; it reads the pod's annotations (sdk.Labels) and
// the basic fields.
func init() { sdk.Register(injector{}, sdk.Reads(sdk.Labels)) }

func main() {}
