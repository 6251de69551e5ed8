package runtime

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestManager_LogFile(t *testing.T) {
	m, f := newTestManager(t)
	pod := testPod("logs", v1.RestartPolicyAlways, "main")
	ctx := context.Background()
	if _, _, err := m.LogFile(ctx, pod, "main", false); err == nil || !strings.Contains(err.Error(), "waiting to start") {
		t.Errorf("before the container exists: %v", err)
	}
	st, _ := syncOnce(t, m, pod, NewBackOff())
	path, running, err := m.LogFile(ctx, pod, "main", false)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(m.PodLogDir(pod.Namespace, pod.Name, pod.UID), "main", "0.log")
	if path != want || !running() {
		t.Errorf("LogFile = %s, running %v; want %s, running", path, running(), want)
	}
	if _, _, err := m.LogFile(ctx, pod, "main", true); err == nil || !strings.Contains(err.Error(), "previous terminated container") {
		t.Errorf("previous of a first instance: %v", err)
	}
	// The container exits and is restarted: the newest is 1.log, the
	// previous 0.log, which no longer runs.
	first := st.FindContainer("main")
	exit(f, first.ID, 1, time.Now())
	if running() {
		t.Error("running() still true after the container exited")
	}
	syncOnce(t, m, pod, nil)
	path, _, err = m.LogFile(ctx, pod, "main", false)
	if err != nil || filepath.Base(path) != "1.log" {
		t.Errorf("after a restart: %s, %v; want 1.log", path, err)
	}
	path, running, err = m.LogFile(ctx, pod, "main", true)
	if err != nil || filepath.Base(path) != "0.log" || running() {
		t.Errorf("previous after a restart: %s, %v, running %v; want 0.log, not running", path, err, running != nil && running())
	}
	// The second instance exits too and waits to restart: previous is
	// the last terminated one, 1.log (the kubelet's lastState), even if
	// 0.log's container has been collected.
	second, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	exit(f, second.FindContainer("main").ID, 1, time.Now())
	path, _, err = m.LogFile(ctx, pod, "main", true)
	if err != nil || filepath.Base(path) != "1.log" {
		t.Errorf("previous while the newest waits to restart: %s, %v; want 1.log", path, err)
	}
}
