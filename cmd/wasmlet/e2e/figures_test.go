//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// Figures of speed and memory, on containerd: N host-network
// pods from manifests to every container running through the agent, against
// the same N pods started one after another by a bare CRI client in the
// same run; and the agent's RSS with the N pods running and no plugins.
// Printed as lines starting with "FIGURE".
func testFigures(t *testing.T) {
	n := flags.BenchPods

	floor1 := floor(t, n, 1)
	cleanRuntime(t)

	// The agent: N manifests written at once.
	a := newAgent(t, "figures", flags.Endpoint)
	a.start(t)
	defer a.Stop(t)
	a.diagnose(t)
	names := make([]string, n)
	pods := make([][]byte, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench%d", i)
		pods[i] = manifestYAML(t, hostNet(newPod(names[i], v1.RestartPolicyAlways, box("main", "sleep", "inf"))))
	}
	start := time.Now()
	for i, name := range names {
		a.WriteRaw(t, name+".yaml", pods[i])
	}
	harness.Eventually(t, 5*time.Minute, fmt.Sprintf("%d bench containers running in the runtime", n), func() (bool, string) {
		ctx, cancel := withTimeout(30 * time.Second)
		defer cancel()
		cs, err := rt.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, c := range cs {
			if strings.HasPrefix(c.Labels[labelPodName], "bench") {
				running++
			}
		}
		return running == n, fmt.Sprintf("%d running", running)
	})
	viaAgent := time.Since(start)
	harness.Eventually(t, time.Minute, fmt.Sprintf("/pods shows %d bench pods Running", n), func() (bool, string) {
		l, err := a.Pods()
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for i := range l.Items {
			if strings.HasPrefix(l.Items[i].Name, "bench") && allRunning(&l.Items[i]) {
				running++
			}
		}
		return running == n, fmt.Sprintf("%d running", running)
	})
	inPods := time.Since(start)
	// RSS when every pod runs, then over five seconds of steady state (the
	// Go heap grows and shrinks with GC cycles).
	rss, rssMax, rssLast := vmRSS(t, a.Pid()), int64(0), int64(0)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(pollEvery) {
		rssLast = vmRSS(t, a.Pid())
		rssMax = max(rssMax, rssLast)
	}
	anon, file := procStatus(t, a.Pid(), "RssAnon"), procStatus(t, a.Pid(), "RssFile")
	load := loadAvg()
	a.Stop(t)
	cleanRuntime(t)
	// The floor again after the agent: the machine is shared and its load
	// changes, so the agent is compared with the faster of the two.
	best := min(floor1, floor(t, n, 2))

	t.Logf("FIGURE containerd %d host-network pods, manifests → all containers running via wasmlet run: %v (%.1f pods/s); all Running in /pods after %v; load average %s",
		n, viaAgent.Round(time.Millisecond), float64(n)/viaAgent.Seconds(), inPods.Round(time.Millisecond), load)
	t.Logf("FIGURE agent/floor time ratio: %.2f against the faster floor %v (target ≤ 1.00)", viaAgent.Seconds()/best.Seconds(), best.Round(time.Millisecond))
	t.Logf("FIGURE agent RSS with %d running pods, no plugins: %.1f MB when all ran, max %.1f MB and %.1f MB after 5 s steady (target ≤ 50 MB); of which anonymous %.1f MB, file-backed (the binary) %.1f MB",
		n, mb(rss), mb(rssMax), mb(rssLast), mb(anon), mb(file))
}

// floor starts n host-network pods one after another with the bare CRI
// client, as the kubelet would start one pod, and returns the time taken.
func floor(t *testing.T, n, round int) time.Duration {
	t.Helper()
	logDir := filepath.Join(flags.Base, fmt.Sprintf("floor%d-logs", round))
	start := time.Now()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("floor%d-%d", round, i)
		ctx, cancel := withTimeout(2 * time.Minute)
		_, _, err := rt.RunPod(ctx, cri.Pod{
			Name: name, Namespace: "default", UID: fmt.Sprintf("floor-uid-%d-%d", round, i), Image: flags.Image,
			Args: []string{"sleep", "inf"}, HostNetwork: true, LogDir: filepath.Join(logDir, name),
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	d := time.Since(start)
	t.Logf("FIGURE containerd %d host-network pods, sequential bare CRI client (round %d): %v (%.1f pods/s); load average %s",
		n, round, d.Round(time.Millisecond), float64(n)/d.Seconds(), loadAvg())
	return d
}

// loadAvg is the 1-, 5- and 15-minute load average, to read a figure
// taken on a shared machine by.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func manifestYAML(t testing.TB, p *v1.Pod) []byte {
	t.Helper()
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// vmRSS reads a process's resident set size in bytes from /proc.
func vmRSS(t testing.TB, pid int) int64 { return procStatus(t, pid, "VmRSS") }

// procStatus reads one "kB" field of /proc/<pid>/status in bytes.
func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field+":" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
