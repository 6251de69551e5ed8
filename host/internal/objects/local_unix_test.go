//go:build unix

package objects

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

func TestLocalSkipsFIFO(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	var logs syncbuf.Buffer
	l := newTestLocal(dir, &logs)

	done := make(chan error, 1)
	go func() {
		_, err := l.ConfigMap(context.Background(), "default", "web")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ConfigMap: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("ConfigMap blocked on the FIFO")
	}
	if !strings.Contains(logs.String(), "pipe.yaml: not a regular file") {
		t.Errorf("the FIFO was not logged as skipped:\n%s", logs.String())
	}
}

func TestReadManifestsRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipe.yaml")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readManifests(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("readManifests(FIFO) = %v, want 'not a regular file'", err)
		}
	case <-time.After(patience):
		t.Fatal("readManifests blocked on a FIFO")
	}
}
