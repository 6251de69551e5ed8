package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// streamingRS is the CRI client of a test manager with the streaming calls
// recorded and answered with a URL: the cri-api fake answers them with an
// empty URL, which the CRI client refuses. Everything else, ExecSync
// included unless execSync is set, goes to the fake runtime.
type streamingRS struct {
	cri.RuntimeService

	mu       sync.Mutex
	exec     *runtimeapi.ExecRequest
	attach   *runtimeapi.AttachRequest
	pf       *runtimeapi.PortForwardRequest
	execSync func(containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error)
}

func (s *streamingRS) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exec = req
	return &runtimeapi.ExecResponse{Url: "http://127.0.0.1:10010/exec/tok-exec"}, nil
}

func (s *streamingRS) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attach = req
	return &runtimeapi.AttachResponse{Url: "http://127.0.0.1:10010/attach/tok-attach"}, nil
}

func (s *streamingRS) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pf = req
	return &runtimeapi.PortForwardResponse{Url: "http://127.0.0.1:10010/portforward/tok-pf"}, nil
}

func (s *streamingRS) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if s.execSync != nil {
		return s.execSync(containerID, cmd, timeout)
	}
	return s.RuntimeService.ExecSync(ctx, containerID, cmd, timeout)
}

func withStreaming(m *Manager) *streamingRS {
	s := &streamingRS{RuntimeService: m.rs}
	m.rs = s
	return s
}

func wantNotRunning(t *testing.T, err error, container, pod string) {
	t.Helper()
	want := fmt.Sprintf("container %q in pod %q is not running", container, pod)
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestManager_ExecURL(t *testing.T) {
	m, f := newTestManager(t)
	rs := withStreaming(m)
	ctx := context.Background()
	pod := testPod("exec", v1.RestartPolicyAlways, "main", "side")

	// No container yet.
	_, err := m.ExecURL(ctx, pod, "main", []string{"sh"}, true, true, false, true)
	wantNotRunning(t, err, "main", pod.Name)

	st, _ := syncOnce(t, m, pod, NewBackOff())
	u, err := m.ExecURL(ctx, pod, "main", []string{"ls", "-l"}, true, true, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if u.String() != "http://127.0.0.1:10010/exec/tok-exec" {
		t.Errorf("URL = %s", u)
	}
	rs.mu.Lock()
	req := rs.exec
	rs.mu.Unlock()
	if req.ContainerId != st.FindContainer("main").ID || !slices.Equal(req.Cmd, []string{"ls", "-l"}) ||
		!req.Stdin || !req.Stdout || req.Stderr || !req.Tty {
		t.Errorf("exec request = %+v, want container %s", req, st.FindContainer("main").ID)
	}

	// A container the runtime does not have.
	_, err = m.ExecURL(ctx, pod, "nope", []string{"sh"}, false, true, true, false)
	wantNotRunning(t, err, "nope", pod.Name)

	// The container exits: not running until it is restarted, then the
	// new instance is the one exec'd into.
	exit(f, st.FindContainer("main").ID, 1, time.Now())
	_, err = m.ExecURL(ctx, pod, "main", []string{"sh"}, false, true, true, false)
	wantNotRunning(t, err, "main", pod.Name)
	st, _ = syncOnce(t, m, pod, nil)
	if _, err := m.ExecURL(ctx, pod, "main", []string{"sh"}, false, true, true, false); err != nil {
		t.Fatal(err)
	}
	rs.mu.Lock()
	req = rs.exec
	rs.mu.Unlock()
	if cur := st.FindContainer("main"); cur.RestartCount != 1 || req.ContainerId != cur.ID {
		t.Errorf("after a restart exec went to %s, want the new instance %+v", req.ContainerId, cur)
	}
}

func TestManager_AttachURL(t *testing.T) {
	m, f := newTestManager(t)
	rs := withStreaming(m)
	ctx := context.Background()
	pod := testPod("attach", v1.RestartPolicyNever, "main")
	st, _ := syncOnce(t, m, pod, NewBackOff())
	u, err := m.AttachURL(ctx, pod, "main", false, true, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rs.mu.Lock()
	req := rs.attach
	rs.mu.Unlock()
	if u.Path != "/attach/tok-attach" || req.ContainerId != st.FindContainer("main").ID || req.Stdin || !req.Stdout || !req.Stderr || req.Tty {
		t.Errorf("AttachURL = %s, request %+v", u, req)
	}
	exit(f, st.FindContainer("main").ID, 0, time.Now())
	_, err = m.AttachURL(ctx, pod, "main", false, true, true, false)
	wantNotRunning(t, err, "main", pod.Name)
}

func TestManager_PortForwardURL(t *testing.T) {
	m, _ := newTestManager(t)
	rs := withStreaming(m)
	ctx := context.Background()
	pod := testPod("pf", v1.RestartPolicyAlways, "main")
	zero := int64(0)
	pod.Spec.TerminationGracePeriodSeconds = &zero

	// No sandbox.
	if _, err := m.PortForwardURL(ctx, pod, nil); err == nil || err.Error() != `pod "web-pf" has no ready sandbox` {
		t.Errorf("without a sandbox: %v", err)
	}

	st, _ := syncOnce(t, m, pod, NewBackOff())
	u, err := m.PortForwardURL(ctx, pod, []int32{80, 8080})
	if err != nil {
		t.Fatal(err)
	}
	rs.mu.Lock()
	req := rs.pf
	rs.mu.Unlock()
	if u.Path != "/portforward/tok-pf" || req.PodSandboxId != st.Sandboxes[0].ID || !slices.Equal(req.Port, []int32{80, 8080}) {
		t.Errorf("PortForwardURL = %s, request %+v, want sandbox %s", u, req, st.Sandboxes[0].ID)
	}

	// The pod is stopped: its sandbox is no longer ready.
	if err := m.KillPod(ctx, pod, st, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PortForwardURL(ctx, pod, nil); err == nil || !strings.Contains(err.Error(), "no ready sandbox") {
		t.Errorf("after the pod stopped: %v", err)
	}
}

func TestManager_RunInContainer(t *testing.T) {
	m, f := newTestManager(t)
	rs := withStreaming(m)
	ctx := context.Background()
	pod := testPod("run", v1.RestartPolicyAlways, "main")

	if _, err := m.RunInContainer(ctx, pod, "main", []string{"true"}, 0); err == nil {
		t.Error("RunInContainer before the container exists: no error")
	}
	st, _ := syncOnce(t, m, pod, NewBackOff())

	// Output: stdout then stderr.
	var gotID string
	var gotCmd []string
	var gotTimeout time.Duration
	rs.execSync = func(id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
		gotID, gotCmd, gotTimeout = id, cmd, timeout
		return []byte("out\n"), []byte("err\n"), nil
	}
	out, err := m.RunInContainer(ctx, pod, "main", []string{"echo", "hi"}, 5*time.Second)
	if err != nil || string(out) != "out\nerr\n" {
		t.Errorf("RunInContainer = %q, %v", out, err)
	}
	if gotID != st.FindContainer("main").ID || !slices.Equal(gotCmd, []string{"echo", "hi"}) || gotTimeout != 5*time.Second {
		t.Errorf("ExecSync(%s, %v, %v)", gotID, gotCmd, gotTimeout)
	}

	// A non-zero exit, through the CRI client and the fake runtime: an
	// error carrying the exit code.
	rs.execSync = nil
	f.RuntimeService.InjectError("ExecSync", utilexec.CodeExitError{Err: errors.New("exit status 3"), Code: 3})
	_, err = m.RunInContainer(ctx, pod, "main", []string{"false"}, 0)
	var exitErr utilexec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 3 || !strings.Contains(err.Error(), "exited with 3") {
		t.Errorf("non-zero exit: %v (%T)", err, err)
	}
	// A zero exit through the fake runtime.
	if out, err := m.RunInContainer(ctx, pod, "main", []string{"true"}, 0); err != nil || len(out) != 0 {
		t.Errorf("zero exit: %q, %v", out, err)
	}
}
