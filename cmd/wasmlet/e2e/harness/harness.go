// Package harness is what wasmlet's two end-to-end suites share:
// cmd/wasmlet/e2e (static pods against a real runtime, build tag e2e) and
// cmd/wasmlet/e2eapi (a node joined to a real kube-apiserver, build tag
// e2e_apiserver). It holds the flags both take, one `wasmlet run` process
// with its own directories (Agent), the polling helpers (Eventually, Holds)
// and one-line pod summaries for failure messages.
//
// It is an ordinary package without tests or build tags: it compiles with
// `go build ./...` and `go vet ./...`, and nothing in it runs unless a suite
// (started by hack/e2e.sh or hack/e2e-apiserver.sh) calls it.
package harness

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Flags are the flags both suites take; the scripts in hack/ set them.
type Flags struct {
	// Runtime is the runtime under test: containerd or embedded.
	Runtime string
	// Endpoint is the CRI endpoint of the runtime under test (unix://…).
	Endpoint string
	// Wasmlet is the wasmlet binary; Check makes it absolute.
	Wasmlet string
	// Image is the testbox image reference.
	Image string
	// Base is a short directory for agent state (unix socket paths must stay
	// under 108 bytes); Check makes a temporary one when empty.
	Base string
	// Hack is the repository's hack directory.
	Hack string
	// BenchPods is how many pods the start-up figure starts.
	BenchPods int
}

// RegisterFlags defines the shared flags on fs, with defaultRuntime as
// -runtime's default, and returns where their values land after fs.Parse.
func RegisterFlags(fs *flag.FlagSet, defaultRuntime string) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Runtime, "runtime", defaultRuntime, "runtime under test: containerd or embedded")
	fs.StringVar(&f.Endpoint, "endpoint", "", "CRI endpoint of the runtime under test (unix://…)")
	fs.StringVar(&f.Wasmlet, "wasmlet", "../../../bin/wasmlet", "the wasmlet binary")
	fs.StringVar(&f.Image, "image", "wasmlet.local/testbox:1.0", "the testbox image reference")
	fs.StringVar(&f.Base, "base", "", "a short directory for agent state (unix socket paths < 108 bytes); empty means a temp dir")
	fs.StringVar(&f.Hack, "hack", "../../../hack", "the repository's hack directory")
	fs.IntVar(&f.BenchPods, "bench-pods", 30, "pods in the start-up figure")
	return f
}

// Check validates the parsed flags for a suite named suite: -endpoint is
// required, -wasmlet must exist (made absolute), and an empty -base becomes
// a new temporary directory.
func (f *Flags) Check(suite string) error {
	if f.Endpoint == "" {
		return fmt.Errorf("%s: -endpoint is required", suite)
	}
	bin, err := filepath.Abs(f.Wasmlet)
	if err == nil {
		f.Wasmlet = bin
		_, err = os.Stat(bin)
	}
	if err != nil {
		return fmt.Errorf("%s: wasmlet binary: %w", suite, err)
	}
	if f.Base == "" {
		d, err := os.MkdirTemp("", suite)
		if err != nil {
			return fmt.Errorf("%s: %w", suite, err)
		}
		f.Base = d
	}
	return nil
}

// PollEvery is the period of every wait (Eventually, Holds, the Agent's
// /pods cache). A suite may change it in TestMain, before any wait.
var PollEvery = 100 * time.Millisecond

// Eventually polls f every PollEvery until it returns true, failing t with
// what and f's last detail after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(PollEvery)
	}
}

// Holds polls f every PollEvery for d and fails t the first time it
// returns false: an invariant observed over a window.
func Holds(t testing.TB, d time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, detail := f(); !ok {
			t.Fatalf("%s no longer holds: %s", what, detail)
		}
		time.Sleep(PollEvery)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Tail is the last n bytes of s, marked with … when cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Running reports whether the pod is Running with every container in the
// running state.
func Running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return true
}

// PodSummary is one line for messages: name, UID, phase, reason, whether
// it is being deleted, pod IP, and per container (init containers first) its
// state, restart count and ID.
func PodSummary(p *v1.Pod) string {
	if p == nil {
		return "<absent>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s uid=%s phase=%s", p.Name, p.UID, p.Status.Phase)
	if p.Status.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", p.Status.Reason)
	}
	if p.DeletionTimestamp != nil {
		b.WriteString(" deleting")
	}
	if p.Status.PodIP != "" {
		fmt.Fprintf(&b, " ip=%s", p.Status.PodIP)
	}
	for _, set := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range set {
			fmt.Fprintf(&b, " [%s %s restarts=%d id=%.24s]", cs.Name, stateString(cs.State), cs.RestartCount, cs.ContainerID)
		}
	}
	return b.String()
}

func stateString(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d,%s)", s.Terminated.ExitCode, s.Terminated.Reason)
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "unknown"
}

// Waiting is the waiting state of container in p's status, nil when it is
// not waiting (or not listed).
func Waiting(p *v1.Pod, container string) *v1.ContainerStateWaiting {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s.State.Waiting
		}
	}
	return nil
}
