package agent

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkAgent_StaticPodsToRunning measures 1,000 static pods from the
// file source to Running in the agent's view (/pods), on the fake CRI over
// a unix socket. Each iteration is a fresh runtime and agent. Besides
// pods/s it reports cpu-ms/pod, the process's CPU time (agent and fake CRI
// server together) per pod, which a loaded machine does not distort.
func BenchmarkAgent_StaticPodsToRunning(b *testing.B) {
	const n = 1000
	var total, cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := newHarness(b)
		for j := 0; j < n; j++ {
			h.write(b, fmt.Sprintf("p%04d", j), "wasmlet.local/busybox:1.0")
		}
		cfg := h.config()
		cfg.PLEGRelistPeriod, cfg.HousekeepingInterval, cfg.ContainerGCPeriod = metav1.Duration{}, metav1.Duration{}, metav1.Duration{}
		cfg.MaxPods = 2 * n
		a, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		cpu0 := cpuTime()
		start := time.Now()
		go func() { done <- a.Run(ctx) }()
		waitPods(b, a, n, v1.PodRunning, 2*time.Minute)
		total += time.Since(start)
		cpu += cpuTime() - cpu0
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "pods/s")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(n*b.N), "cpu-ms/pod")
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
