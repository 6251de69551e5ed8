package hack_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestRunSh_agentRestartKeepsPods runs hack/run.sh (what `make run` runs)
// twice, stopping the agent with SIGTERM in between: the embedded runtime
// is its own process, so the demo pod's container runs on — the same
// container, restartCount 0 — and the agent exits 0.
func TestRunSh_agentRestartKeepsPods(t *testing.T) {
	tmp, err := os.MkdirTemp("", "wlrun") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	bin, testbox := filepath.Join(tmp, "wasmlet"), filepath.Join(tmp, "testbox.wasm")
	for _, b := range []struct {
		out, pkg string
		env      []string
	}{{bin, "../cmd/wasmlet", nil}, {testbox, "../examples/workloads/testbox", []string{"GOOS=wasip1", "GOARCH=wasm"}}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	state, plugins := filepath.Join(tmp, "state"), filepath.Join(tmp, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	defer func() {
		// The runtime this test started, by its pid file: it and its pods.
		b, err := os.ReadFile(filepath.Join(state, "runtime.pid"))
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 600 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()

	run := func() (*exec.Cmd, *strings.Builder) {
		var out strings.Builder
		cmd := exec.Command("bash", "run.sh")
		cmd.Env = append(os.Environ(), "WASMLET_RUN_DIR="+state, "WASMLET_BIN="+bin, "WASMLET_TESTBOX="+testbox,
			"WASMLET_PLUGIN_DIR="+plugins, "WASMLET_PORT="+strconv.Itoa(port), "WASMLET_NODE=n1")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}
	// running waits for hello-n1's container to run and returns its status.
	running := func(out *strings.Builder) v1.ContainerStatus {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var list v1.PodList
			if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", port)); err == nil {
				json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
			}
			for _, p := range list.Items {
				if p.Name == "hello-n1" && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
					return p.Status.ContainerStatuses[0]
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("hello-n1 not running; pods %+v\nrun.sh output:\n%s", list.Items, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop := func(cmd *exec.Cmd, out *strings.Builder) {
		t.Helper()
		cmd.Process.Signal(syscall.SIGTERM) // run.sh execs the agent: this is the agent
		if err := cmd.Wait(); err != nil {
			t.Fatalf("agent after SIGTERM: %v, want exit 0\n%s", err, out.String())
		}
	}

	cmd, out := run()
	first := running(out)
	stop(cmd, out)
	cmd, out = run()
	defer func() {
		if cmd.ProcessState == nil {
			stop(cmd, out)
		}
	}()
	second := running(out)
	if second.ContainerID != first.ContainerID || second.RestartCount != 0 {
		t.Errorf("after the agent's restart: container %s restartCount %d; want the same container %s, restartCount 0\n%s",
			second.ContainerID, second.RestartCount, first.ContainerID, out.String())
	}
	if !strings.Contains(out.String(), "runtime already running") {
		t.Errorf("the second run did not find the runtime running:\n%s", out.String())
	}
}
