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
// IP and hostname.
func writeHostsFile(podDir string, pod *v1.Pod, ips []string) (string, error) {
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
		host := podHostname(pod)
		for _, ip := range ips {
			fmt.Fprintf(&buf, "%s\t%s\n", ip, host)
		}
		for _, ha := range pod.Spec.HostAliases {
			fmt.Fprintf(&buf, "\n# Entries added by HostAliases.\n%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return path, nil
}

func podHostname(pod *v1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
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

// volumeMounts turns the container's volume mounts into bind mounts:
// emptyDir under <podDir>/volumes/kubernetes.io~empty-dir/<name>, hostPath
// as given (created per its type).
func volumeMounts(podDir string, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("container %s: volume %q not in pod spec", c.Name, vm.Name)
		}
		var host string
		switch {
		case v.EmptyDir != nil:
			host = filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", v.Name)
			if err := os.MkdirAll(host, 0o777); err != nil {
				return nil, fmt.Errorf("container %s: volume %q: %w", c.Name, v.Name, err)
			}
			os.Chmod(host, 0o777)
		case v.HostPath != nil:
			host = v.HostPath.Path
			if err := ensureHostPath(v.HostPath); err != nil {
				return nil, fmt.Errorf("container %s: volume %q: %w", c.Name, v.Name, err)
			}
		default:
			return nil, fmt.Errorf("container %s: volume %q: only emptyDir and hostPath volumes are supported", c.Name, v.Name)
		}
		if vm.SubPath != "" {
			if filepath.IsAbs(vm.SubPath) || slices.Contains(strings.Split(filepath.ToSlash(vm.SubPath), "/"), "..") {
				return nil, fmt.Errorf("container %s: volume %q: subPath %q escapes the volume", c.Name, v.Name, vm.SubPath)
			}
			host = filepath.Join(host, vm.SubPath)
		}
		prop := runtimeapi.MountPropagation_PROPAGATION_PRIVATE
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case v1.MountPropagationHostToContainer:
				prop = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case v1.MountPropagationBidirectional:
				prop = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly, Propagation: prop})
	}
	return mounts, nil
}

func ensureHostPath(hp *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	switch t {
	case v1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(hp.Path, 0o755)
		}
	case v1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
	case v1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("hostPath %s is not a directory", hp.Path)
		}
	case v1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath %s is not a file", hp.Path)
		}
	case v1.HostPathSocket:
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("hostPath %s is not a socket", hp.Path)
		}
	}
	return nil
}
