package volumes

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs on dir unless one already is (size 0: the
// kernel's default, half the memory; mode "": tmpfs's default, 1777).
func mountTmpfs(dir string, size int64, mode string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	var opts []string
	if mode != "" {
		opts = append(opts, "mode="+mode)
	}
	if size > 0 {
		opts = append(opts, "size="+strconv.FormatInt(size, 10))
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, strings.Join(opts, ",")); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is a mount point: its device differs
// from its parent's.
func isMountPoint(dir string) (bool, error) {
	var st, pst unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &pst); err != nil {
		return false, err
	}
	return st.Dev != pst.Dev, nil
}

// UnmountUnder unmounts every mount at or below dir (deepest first), as
// read from /proc/self/mountinfo: a pod's tmpfs volumes before its
// directory is removed. It works from the mount table, so it also finds
// the mounts of an earlier run of the agent.
func UnmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	var firstErr error
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT && firstErr == nil {
			firstErr = fmt.Errorf("unmount %s: %w", points[i], err)
		}
	}
	return firstErr
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
