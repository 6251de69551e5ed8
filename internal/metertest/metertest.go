// Package metertest holds what the benchmarks comparing deadline mechanisms
// (host/internal/pluginhost, host/wasiruntime) share. On a shared, loaded
// machine wall-clock time swings between runs, so they also report the CPU
// time of the thread the guest runs on.
package metertest

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// ThreadCPU is the calling thread's CPU time (user + system; Linux
// RUSAGE_THREAD), or 0 if it cannot be read.
func ThreadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is RUSAGE_THREAD (Linux).
const rusageThread = 1

// Loop runs f b.N times with the goroutine locked to its thread and reports
// that thread's CPU time per run as cpu-ns/op; the first error f returns
// fails the benchmark.
func Loop(b *testing.B, f func() error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	cpu := ThreadCPU()
	for i := 0; i < b.N; i++ {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ThreadCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
