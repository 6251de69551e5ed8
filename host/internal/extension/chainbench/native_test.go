//go:build !wasip1

package bench

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The four policies' checks written natively against k8s.io/api, with the
// same configuration as the wasm chain's: the baseline of BenchmarkChain.

var (
	baseline = set("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
	allowed  = []string{"registry.example.com/", "docker.io/envoyproxy/"}
	safe     = set("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes")
)

func set(items ...string) map[string]bool {
	m := map[string]bool{}
	for _, it := range items {
		m[it] = true
	}
	return m
}

// nativeChain decodes a pod's JSON and runs the checks.
func nativeChain(raw []byte) error {
	var p v1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	return nativeChecks(&p)
}

// nativeChecks are no-privileged, image-allowlist, require-limits and
// sysctl-allowlist in Go.
func nativeChecks(p *v1.Pod) error {
	if p.Spec.HostNetwork || p.Spec.HostPID || p.Spec.HostIPC {
		return fmt.Errorf("host namespace")
	}
	var all []*v1.Container
	for i := range p.Spec.InitContainers {
		all = append(all, &p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		all = append(all, &p.Spec.Containers[i])
	}
	for _, c := range all {
		if sc := c.SecurityContext; sc != nil {
			if sc.Privileged != nil && *sc.Privileged {
				return fmt.Errorf("container %s is privileged", c.Name)
			}
			if sc.Capabilities != nil {
				for _, cp := range sc.Capabilities.Add {
					if !baseline[strings.TrimPrefix(string(cp), "CAP_")] {
						return fmt.Errorf("container %s adds %s", c.Name, cp)
					}
				}
			}
		}
	}
	for _, c := range all {
		ok := false
		for _, a := range allowed {
			if strings.HasPrefix(c.Image, a) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("image %s not allowed", c.Image)
		}
	}
	for _, c := range all {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if _, ok := c.Resources.Limits[r]; !ok {
				return fmt.Errorf("container %s has no %s limit", c.Name, r)
			}
		}
	}
	if sc := p.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			if !safe[s.Name] {
				return fmt.Errorf("sysctl %s forbidden", s.Name)
			}
		}
	}
	return nil
}
