package runtime

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// shareVolume makes the host path of a volume the agent manages (under
// its root dir) a shared mount — bind-mounted on itself first when it is
// not a mount point — so a container can mount it with Bidirectional
// propagation (containerd refuses a host path that is not on a shared
// mount). The kubelet makes its whole root dir rshared at start; doing it
// per volume, when a container asks, leaves every other mount as it was
// and is undone with the pod's volumes (their unmount covers every mount
// under them). A path outside the root dir (a hostPath) is the
// operator's to share, as with the kubelet.
func (m *Manager) shareVolume(host string) error {
	root := filepath.Clean(m.cfg.RootDir) + string(filepath.Separator)
	if !strings.HasPrefix(filepath.Clean(host)+string(filepath.Separator), root) {
		return nil
	}
	return makeRShared(host)
}

// makeRShared makes path a mount point and its mount (recursively) shared.
func makeRShared(path string) error {
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("root dir: %w", err)
	}
	point, shared, err := mountOf(path)
	if err != nil {
		return err
	}
	if point == path && shared {
		return nil
	}
	if point != path {
		if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount root dir %s on itself: %w", path, err)
		}
	}
	if err := unix.Mount("", path, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make root dir %s a shared mount: %w", path, err)
	}
	return nil
}

// mountOf returns the mount point path is on (the longest that is a prefix
// of it, per /proc/self/mountinfo) and whether that mount is shared.
func mountOf(path string) (point string, shared bool, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mountpoint options optional... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp != path && !strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/") {
			continue
		}
		if len(mp) < len(point) {
			continue
		}
		point, shared = mp, false
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	return point, shared, sc.Err()
}

// unescapeMountinfo undoes the octal escapes of /proc/self/mountinfo
// (\040 for a space …).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
