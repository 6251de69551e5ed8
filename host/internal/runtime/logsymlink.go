package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// maxLogSymlinkName is the longest name of a log symlink, ".log" included,
// as the kubelet cuts it (a file name has 255 bytes at most).
const maxLogSymlinkName = 255

// logSymlinkName is the kubelet's name for a container's log symlink:
// <pod>_<namespace>_<container>-<container ID>.log, cut to 255 bytes
// before the suffix is lost.
func logSymlinkName(pod *v1.Pod, container, id string) string {
	name := fmt.Sprintf("%s_%s_%s-%s", pod.Name, pod.Namespace, container, id)
	if len(name) > maxLogSymlinkName-len(".log") {
		name = name[:maxLogSymlinkName-len(".log")]
	}
	return name + ".log"
}

// linkLog makes the container's log symlink in Config.LogSymlinkDir
// (/var/log/containers on a node), pointing at its CRI log file, as the
// kubelet does after it starts a container; log collectors read that
// directory. A failure is logged: the container runs on.
func (m *Manager) linkLog(pod *v1.Pod, container, id, logPath string) {
	dir := m.cfg.LogSymlinkDir
	if dir == "" {
		return
	}
	link := filepath.Join(dir, logSymlinkName(pod, container, id))
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.Symlink(logPath, link)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		m.log.Warn("container log symlink not made", "pod", pod.Namespace+"/"+pod.Name, "container", container, "link", link, "error", err)
	}
}

// unlinkLog removes the log symlink of a removed container.
func (m *Manager) unlinkLog(id string) {
	if m.cfg.LogSymlinkDir == "" || id == "" {
		return
	}
	links, _ := filepath.Glob(filepath.Join(m.cfg.LogSymlinkDir, "*-"+id+".log"))
	for _, l := range links {
		if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("container log symlink not removed", "link", l, "error", err)
		}
	}
}

// removeDeadLogSymlinks removes the log symlinks whose log file is gone (its
// pod's logs were removed), as the kubelet's garbage collector does. Only
// symbolic links ending in .log are looked at.
func (m *Manager) removeDeadLogSymlinks() {
	dir := m.cfg.LogSymlinkDir
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 || !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				m.log.Warn("dead container log symlink not removed", "link", p, "error", err)
			}
		}
	}
}
