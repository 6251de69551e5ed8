package nodememory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const meminfoFile = `MemTotal:        8000000 kB
MemFree:         1000000 kB
MemAvailable:    5000000 kB
Inactive(file):  2000000 kB
`

func TestReader_Read(t *testing.T) {
	const k = 1024
	tests := []struct {
		name    string
		files   map[string]string
		want    Stats
		wantV2  bool
		wantErr string
	}{
		{
			name: "cgroup v1: root usage less total_inactive_file",
			files: map[string]string{
				"proc/meminfo":                        meminfoFile,
				"cgroup/memory/memory.usage_in_bytes": "6000000000\n",
				"cgroup/memory/memory.stat":           "cache 100\ninactive_file 5\ntotal_inactive_file 1000000000\n",
			},
			want: Stats{Capacity: 8000000 * k, Usage: 6000000000, WorkingSet: 5000000000, Available: 8000000*k - 5000000000},
		},
		{
			name: "cgroup v2 root: meminfo's used less Inactive(file)",
			files: map[string]string{
				"proc/meminfo":              meminfoFile,
				"cgroup/cgroup.controllers": "cpu memory pids\n",
			},
			want:   Stats{Capacity: 8000000 * k, Usage: 7000000 * k, WorkingSet: 5000000 * k, Available: 3000000 * k},
			wantV2: true,
		},
		{
			name: "inactive above usage: no working set",
			files: map[string]string{
				"proc/meminfo":                        meminfoFile,
				"cgroup/memory/memory.usage_in_bytes": "100\n",
				"cgroup/memory/memory.stat":           "total_inactive_file 200\n",
			},
			want: Stats{Capacity: 8000000 * k, Usage: 100, WorkingSet: 0, Available: 8000000 * k},
		},
		{
			name:    "no MemTotal",
			files:   map[string]string{"proc/meminfo": "MemFree: 1 kB\n", "cgroup/cgroup.controllers": ""},
			wantV2:  true,
			wantErr: "no MemTotal",
		},
		{
			name: "a bad usage file names it",
			files: map[string]string{
				"proc/meminfo":                        meminfoFile,
				"cgroup/memory/memory.usage_in_bytes": "lots\n",
				"cgroup/memory/memory.stat":           "",
			},
			wantErr: "memory.usage_in_bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, c := range tt.files {
				write(t, filepath.Join(dir, p), c)
			}
			r, err := New(Config{CgroupRoot: filepath.Join(dir, "cgroup"), ProcDir: filepath.Join(dir, "proc")})
			if err != nil {
				t.Fatal(err)
			}
			if r.V2() != tt.wantV2 {
				t.Errorf("V2() = %v, want %v", r.V2(), tt.wantV2)
			}
			got, err := r.Read()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Read() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNew_noHierarchy(t *testing.T) {
	if _, err := New(Config{CgroupRoot: t.TempDir()}); err == nil {
		t.Fatal("New on an empty directory: no error")
	}
}

func TestReader_NewNotifier(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "cgroup.controllers"), "memory")
	r, err := New(Config{CgroupRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.NewNotifier(); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("NewNotifier on cgroup v2: err = %v, want ErrNotSupported", err)
	}
}

// TestNotifier_Run registers a threshold a little above the root
// cgroup's usage on a cgroup v1 machine and touches memory past it: the
// kernel signals the crossing.
func TestNotifier_Run(t *testing.T) {
	r, err := New(Config{})
	if err != nil || r.V2() {
		t.Skip("needs a cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
	}
	n, err := r.NewNotifier()
	if err != nil {
		t.Fatal(err)
	}
	usage, err := readUint(filepath.Join(r.v1Dir(), "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Set(usage + 16<<20); err != nil {
		t.Skipf("cannot write cgroup.event_control (needs root): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crossed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx, func() {
			select {
			case crossed <- struct{}{}:
			default:
			}
		})
	}()
	// Touch memory, 4 MiB at a time up to 256 MiB, until the kernel
	// signals; others' use of memory may also cross it, which is as good.
	var keep [][]byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-crossed:
			cancel()
			<-done
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification within 30s of touching memory past the threshold")
		}
		if len(keep) < 64 {
			b := make([]byte, 4<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
			continue
		}
		select {
		case <-crossed:
			cancel()
			<-done
			return
		case <-time.After(time.Until(deadline)):
		}
	}
}
