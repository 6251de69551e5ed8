package runtime

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/podenv"
)

// logTailWindow is how much of the end of a log file logTail reads: far
// more than 80 lines of CRI prefix (~45 bytes each) plus 2 KiB of text
// need, where the whole file can be many megabytes (it is read on every
// status read of a crash-looping container).
const logTailWindow = 64 << 10

// logTail returns the last lines of a CRI-format log file
// ("<time> <stream> <tag> <text>"), at most maxBytes; it reads only the
// file's last logTailWindow bytes.
func logTail(path string, lines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-logTailWindow, 0)
	b := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		return ""
	}
	b = b[:n]
	if off > 0 {
		// The window starts inside a line: drop that part.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		} else {
			b = nil
		}
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		if len(f) == 4 {
			out = append(out, f[3])
		}
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	s := strings.Join(out, "\n")
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}

const hostsHeader = "# Kubernetes-managed hosts file.\n"

// writeHostsFile writes <podDir>/etc-hosts as the kubelet does: the host's
// /etc/hosts for a host-network pod, else localhost entries and the pod's
// IPs with its hostname (and FQDN when it has a subdomain); hostAliases
// after both.
func writeHostsFile(podDir string, pod *v1.Pod, ips []string, clusterDomain string) (string, error) {
	path := filepath.Join(podDir, "etc-hosts")
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var buf bytes.Buffer
	if pod.Spec.HostNetwork {
		host, err := os.ReadFile("/etc/hosts")
		if err != nil {
			return "", fmt.Errorf("pod %s/%s: read /etc/hosts: %w", pod.Namespace, pod.Name, err)
		}
		buf.WriteString("# Kubernetes-managed hosts file (host network).\n")
		buf.Write(host)
	} else {
		buf.WriteString(hostsHeader)
		buf.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		host, domain := podHostnameAndDomain(pod, clusterDomain)
		for _, ip := range ips {
			if domain != "" {
				fmt.Fprintf(&buf, "%s\t%s.%s\t%s\n", ip, host, domain, host)
			} else {
				fmt.Fprintf(&buf, "%s\t%s\n", ip, host)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		buf.WriteString("\n# Entries added by HostAliases.\n")
		for _, ha := range pod.Spec.HostAliases {
			fmt.Fprintf(&buf, "%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return path, nil
}

// podHostnameAndDomain is the pod's hostname (hostnameOverride, else
// spec.hostname, else its name; at most 63 characters) and, with a
// subdomain, its domain <subdomain>.<namespace>.svc.<clusterDomain>, as the
// kubelet's GeneratePodHostNameAndDomain.
func podHostnameAndDomain(pod *v1.Pod, clusterDomain string) (string, string) {
	if o := pod.Spec.HostnameOverride; o != nil && *o != "" {
		return truncateHostname(*o), ""
	}
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	domain := ""
	if pod.Spec.Subdomain != "" {
		domain = pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + clusterDomain
	}
	return truncateHostname(h), domain
}

func truncateHostname(h string) string {
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// fqdnMaxLen is the longest hostname the kernel holds (its nodename field
// is 65 bytes with the terminating NUL).
const fqdnMaxLen = 64

// checkHostname refuses a pod whose hostname would be an FQDN longer than
// the kernel holds, with the kubelet's message, before its sandbox is made.
func checkHostname(pod *v1.Pod, clusterDomain string) error {
	h, domain := podHostnameAndDomain(pod, clusterDomain)
	if domain == "" || pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return nil
	}
	if fqdn := h + "." + domain; len(fqdn) > fqdnMaxLen {
		return fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, fqdnMaxLen, len(fqdn))
	}
	return nil
}

// sandboxHostname is the hostname the sandbox gets: the pod's hostname,
// or its FQDN with setHostnameAsFQDN.
func sandboxHostname(pod *v1.Pod, clusterDomain string) string {
	h, domain := podHostnameAndDomain(pod, clusterDomain)
	if domain != "" && pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN {
		return h + "." + domain
	}
	return h
}

// terminationLogFile creates an empty file under
// <podDir>/containers/<name>/ for the container's termination message.
func terminationLogFile(podDir, container string) (string, error) {
	dir := filepath.Join(podDir, "containers", container)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	var b [4]byte
	rand.Read(b[:])
	path := filepath.Join(dir, hex.EncodeToString(b[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return "", err
	}
	f.Close()
	// The container may run as any user.
	return path, os.Chmod(path, 0o666)
}

// volumeMounts turns the container's volume mounts into bind mounts of
// the host paths the volume manager gives, with subPath (or subPathExpr,
// expanded with the container's env) inside them. API-data volumes are
// mounted read-only, as the kubelet mounts them.
func (m *Manager) volumeMounts(pod *v1.Pod, c *v1.Container, env []podenv.EnvVar) ([]*runtimeapi.Mount, error) {
	var mounts []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		host, readOnly, err := m.cfg.Volumes.Path(pod, vm.Name)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			if sub, err = podenv.SubPath(vm.SubPathExpr, env); err != nil {
				return nil, fmt.Errorf("container %s: volume %q: subPathExpr: %w", c.Name, vm.Name, err)
			}
		}
		if sub != "" {
			if filepath.IsAbs(sub) || slices.Contains(strings.Split(filepath.ToSlash(sub), "/"), "..") {
				return nil, fmt.Errorf("container %s: volume %q: subPath %q escapes the volume", c.Name, vm.Name, sub)
			}
			root := host
			host = filepath.Join(host, sub)
			if err := subPathTarget(root, host); err != nil {
				return nil, fmt.Errorf("container %s: volume %q: subPath %q: %w", c.Name, vm.Name, sub, err)
			}
		}
		prop := runtimeapi.MountPropagation_PROPAGATION_PRIVATE
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case v1.MountPropagationHostToContainer:
				prop = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				prop = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
				if err := m.shareVolume(host); err != nil {
					return nil, fmt.Errorf("container %s: volume %q: Bidirectional propagation: %w", c.Name, vm.Name, err)
				}
			}
		}
		rro, err := m.recursiveReadOnly(pod, vm)
		if err != nil {
			return nil, fmt.Errorf("container %s: failed to resolve recursive read-only mode: %w", c.Name, err)
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly || readOnly,
			RecursiveReadOnly: rro, Propagation: prop})
	}
	return mounts, nil
}

// recursiveReadOnly resolves a mount's recursiveReadOnly as the kubelet
// does: Disabled (or unset) is not; IfPossible is when the pod's runtime
// handler supports it; Enabled is, or fails the container (its config
// error keeps the pod Pending) when the handler does not. Either needs a
// read-only mount without propagation. What a handler supports is what
// the runtime's last Status said; none known counts as unsupported.
func (m *Manager) recursiveReadOnly(pod *v1.Pod, vm v1.VolumeMount) (bool, error) {
	return m.RecursiveReadOnly(pod, vm)
}

// RecursiveReadOnly resolves a volume mount's recursive read-only mode for
// pod as its containers are created with it (recursiveReadOnly); the
// container statuses' volumeMounts report it.
func (m *Manager) RecursiveReadOnly(pod *v1.Pod, vm v1.VolumeMount) (bool, error) {
	if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !vm.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", vm.Name)
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", vm.Name, *vm.MountPropagation)
	}
	supported := false
	if handler, err := m.runtimeHandler(pod); err == nil {
		if rro := m.rroHandlers.Load(); rro != nil {
			supported = (*rro)[handler]
		}
	}
	switch *vm.RecursiveReadOnly {
	case v1.RecursiveReadOnlyIfPossible:
		return supported, nil
	case v1.RecursiveReadOnlyEnabled:
		if !supported {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", vm.Name)
		}
		return true, nil
	}
	return false, fmt.Errorf("volume %q: unknown recursive read-only mode %q", vm.Name, *vm.RecursiveReadOnly)
}

// subPathTarget makes a missing subPath a directory with the volume
// root's mode, setgid and sticky bits included (as the kubelet's
// SafeMakeDir makes it), so the bind mount has a source.
func subPathTarget(root, path string) error {
	if _, err := os.Lstat(path); err == nil || !os.IsNotExist(err) {
		return err
	}
	fi, err := os.Stat(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return err
	}
	return os.Chmod(path, fi.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSetuid|os.ModeSticky))
}
