package regularfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	in := func(n string) string { return filepath.Join(dir, n) }
	if err := os.WriteFile(in("f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(in("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in("f"), in("link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		max     int64
		want    string
		wantErr string
	}{
		{in("f"), 5, "hello", ""},
		{in("link"), 5, "hello", ""},
		{in("f"), 4, "", "larger than 4 bytes"},
		{in("fifo"), 5, "", "not a regular file"},
		{dir, 5, "", "not a regular file"},
		{in("missing"), 5, "", "no such file"},
	}
	for _, tt := range tests {
		got, err := Read(tt.path, tt.max)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Read(%s, %d) error %v, want %q", tt.path, tt.max, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("Read(%s, %d) = %q, %v", tt.path, tt.max, got, err)
		}
	}
}
