// Package disktest writes files of a given size and reads back what the
// filesystem allocated to them, for tests of disk usage.
package disktest

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// WriteFile writes n random bytes to path, making its directory.
func WriteFile(tb testing.TB, path string, n int) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Blocks is what the filesystem allocated to each path (st_blocks × 512,
// symlinks not followed), summed: the oracle for a du-style walk.
func Blocks(tb testing.TB, paths ...string) uint64 {
	tb.Helper()
	var sum uint64
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			tb.Fatal(err)
		}
		sum += uint64(fi.Sys().(*syscall.Stat_t).Blocks) * 512
	}
	return sum
}
