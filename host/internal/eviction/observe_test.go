package eviction

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmlet/wasmlet/host/internal/nodememory"
)

func TestObserver_Observe(t *testing.T) {
	proc := t.TempDir()
	for f, v := range map[string]string{"pid_max": "4194304\n", "threads-max": "1000\n"} {
		if err := os.MkdirAll(filepath.Join(proc, "sys", "kernel"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, "sys", "kernel", f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fss := map[string]FsInfo{
		"/root":   {Device: 1, Capacity: 1000, Available: 100, Inodes: 50, InodesFree: 5},
		"/images": {Device: 2, Capacity: 2000, Available: 300, Inodes: 60, InodesFree: 6},
		"/same":   {Device: 1, Capacity: 1000, Available: 100, Inodes: 50, InodesFree: 5},
	}
	statfs := func(p string) (FsInfo, error) {
		if fs, ok := fss[p]; ok {
			return fs, nil
		}
		return FsInfo{}, errors.New("no such filesystem " + p)
	}
	for _, c := range []struct {
		name      string
		imageFs   string
		dedicated bool
	}{{"a dedicated image filesystem", "/images", true}, {"images on the root filesystem", "/same", false}} {
		o := NewObserver(ObserverConfig{
			Memory:    func() (nodememory.Stats, error) { return nodememory.Stats{Capacity: 8 << 30, Available: 3 << 30}, nil },
			NodeFs:    "/root",
			ImageFs:   func(context.Context) (string, error) { return c.imageFs, nil },
			ProcDir:   proc,
			Statfs:    statfs,
			Processes: func() (int64, error) { return 400, nil },
		})
		got, err := o.Observe(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		im := fss[c.imageFs]
		want := map[Signal]Observation{
			SignalMemoryAvailable:   {3 << 30, 8 << 30},
			SignalNodeFsAvailable:   {100, 1000},
			SignalNodeFsInodesFree:  {5, 50},
			SignalImageFsAvailable:  {im.Available, im.Capacity},
			SignalImageFsInodesFree: {im.InodesFree, im.Inodes},
			SignalPIDAvailable:      {600, 1000}, // threads-max is the lower
		}
		if len(got.Signals) != len(want) || got.DedicatedImageFs != c.dedicated {
			t.Errorf("%s: %+v, want %d signals, dedicated %v", c.name, got, len(want), c.dedicated)
		}
		for s, w := range want {
			if got.Signals[s] != w {
				t.Errorf("%s: %s = %+v, want %+v", c.name, s, got.Signals[s], w)
			}
		}
	}
	// A signal that cannot be read is left out; the others stay.
	o := NewObserver(ObserverConfig{NodeFs: "/missing", ProcDir: proc, Statfs: statfs, Processes: func() (int64, error) { return 1, nil }})
	got, err := o.Observe(context.Background())
	if err != nil || len(got.Signals) != 1 || got.Signals[SignalPIDAvailable].Capacity != 1000 {
		t.Errorf("with an unreadable nodefs: %+v %v, want pid.available alone", got, err)
	}
}
