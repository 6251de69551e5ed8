// Command validator refuses containers that mount host paths outside an
// allow-list, at the Validate point: it sees each container's final CRI
// config after every plugin's PreCreate adjustments, as a containerd NRI
// plugin's ValidateContainerAdjustment does, so a mount another plugin
// added is checked like one from the pod's spec. The host does not create a
// refused container; its status waits with reason
// CreateContainerConfigError and the refusal's message.
//
// The mounts it checks are the host paths a pod or a plugin chose: a
// hostPath volume's mounts, and the mounts a plugin added (the config's
// owners name them). The mounts the agent makes for other volumes
// (emptyDir, configMap, secrets, projected tokens) are its own, and left
// alone. A pod without hostPath volumes, in a node without mount-adding
// plugins, is never refused.
//
// Config:
//
//	allowedHostPaths: /var/log,/srv   # prefixes, by path components
package main

import (
	"fmt"
	"path"
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

type validator struct{}

// Validate refuses the container when a mount from a hostPath volume or a
// plugin uses a host path outside allowedHostPaths.
func (validator) Validate(req sdk.HookRequest) error {
	if req.Config == nil || req.Container == nil {
		return fmt.Errorf("pod %s/%s: a Validate request without the container's config", req.Pod.Namespace, req.Pod.Name)
	}
	allowed := policy.List("allowedHostPaths", "")
	for _, p := range allowed {
		if !path.IsAbs(p) {
			return fmt.Errorf("config allowedHostPaths: %q is not an absolute path", p)
		}
	}
	volumes := hostPathMounts(&req.Pod, req.Container)
	for _, m := range req.Config.Mounts {
		var source string
		if owner := req.Config.Owners["mounts:"+m.ContainerPath]; owner != "" {
			source = "added by plugin " + owner
		} else if v, ok := volumes[path.Clean(m.ContainerPath)]; ok {
			source = "hostPath volume " + v
		} else {
			continue
		}
		if !under(m.HostPath, allowed) {
			list := "none"
			if len(allowed) > 0 {
				list = strings.Join(allowed, ", ")
			}
			return sdk.Refuse(fmt.Sprintf("container %s mounts host path %s at %s (%s), outside the allowed host paths (%s)",
				req.Container.Name, m.HostPath, m.ContainerPath, source, list))
		}
	}
	return nil
}

// hostPathMounts maps the container paths where c mounts one of pod's
// hostPath volumes to the volume's name.
func hostPathMounts(pod *sdk.Pod, c *sdk.Container) map[string]string {
	hostPath := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			hostPath[v.Name] = true
		}
	}
	out := map[string]string{}
	for _, vm := range c.VolumeMounts {
		if hostPath[vm.Name] {
			out[path.Clean(vm.MountPath)] = vm.Name
		}
	}
	return out
}

// under reports whether hostPath lies under one of the prefixes.
func under(hostPath string, prefixes []string) bool {
	if !path.IsAbs(hostPath) {
		return false
	}
	p := path.Clean(hostPath)
	for _, prefix := range prefixes {
		if sdk.PathUnder(p, prefix) {
			return true
		}
	}
	return false
}

// init registers the validator; it reads the pod's volumes and the
// container's volume mounts besides the basic fields.
func init() { sdk.Register(validator{}, sdk.Reads(sdk.Volumes|sdk.VolumeMounts)) }

func main() {}
