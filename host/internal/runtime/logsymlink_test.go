package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestLogSymlinkName(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace = "web", "default"
	if got := logSymlinkName(pod, "app", "abc123"); got != "web_default_app-abc123.log" {
		t.Errorf("name %q", got)
	}
	pod.Name = strings.Repeat("p", 300)
	if got := logSymlinkName(pod, "app", "abc123"); len(got) != 255 || !strings.HasSuffix(got, ".log") {
		t.Errorf("a long name is %d bytes (%q…), want 255 ending .log", len(got), got[:20])
	}
}

// A started container gets its log symlink pointing at its CRI log file;
// removing the container removes it, and the garbage collection removes
// links whose log is gone and nothing else.
func TestManager_logSymlinks(t *testing.T) {
	links := t.TempDir()
	m, _ := newTestManagerWith(t, func(c *Config) { c.LogSymlinkDir = links })
	ctx := t.Context()
	pod := testPod("u1", v1.RestartPolicyAlways, "app")
	if r := m.SyncPod(ctx, pod, nil, NewBackOff()); r.Error() != nil {
		t.Fatal(r.Error())
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil || len(st.Containers) != 1 {
		t.Fatalf("status %+v, %v", st, err)
	}
	id := st.Containers[0].ID
	link := filepath.Join(links, logSymlinkName(pod, "app", id))
	target, err := os.Readlink(link)
	if want := filepath.Join(m.PodLogDir(pod.Namespace, pod.Name, pod.UID), "app", "0.log"); err != nil || target != want {
		t.Fatalf("link %s → %q, %v; want → %s", link, target, err, want)
	}

	// The fake runtime writes no log: the file the link names is made here.
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(links, "not-a-link.log")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(links, "gone_default_app-dead.log")
	if err := os.Symlink(filepath.Join(t.TempDir(), "missing.log"), dead); err != nil {
		t.Fatal(err)
	}
	m.removeDeadLogSymlinks()
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("a link whose log is gone is still there: %v", err)
	}
	for _, keep := range []string{other, link} {
		if _, err := os.Lstat(keep); err != nil {
			t.Errorf("%s removed: %v", keep, err)
		}
	}
	m.unlinkLog(id)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the removed container's link is still there: %v", err)
	}
}
