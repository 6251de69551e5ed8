package runtime

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// shareRootDir makes the root dir a shared mount, bind-mounting it on
// itself first when it is not a mount point, as the kubelet makes its root
// dir rshared at start: a volume under it can then be given to a container
// with Bidirectional propagation (containerd refuses a host path that is
// not on a shared mount). The agent does it once, when a container first
// asks for Bidirectional propagation, so a node that never does keeps its
// mounts as they were.
func (m *Manager) shareRootDir() error {
	m.shareOnce.Do(func() { m.shareErr = makeRShared(m.cfg.RootDir) })
	return m.shareErr
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
