package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/host/internal/container"
)

// fakeRuntime has containers whose logs it reopens as a runtime does: a
// new empty file at the path.
type fakeRuntime struct {
	logs     []container.ContainerLog
	reopened []string
	fail     error
}

func (f *fakeRuntime) RunningContainerLogs(context.Context) ([]container.ContainerLog, error) {
	return f.logs, nil
}

func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	f.reopened = append(f.reopened, id)
	if f.fail != nil {
		return f.fail
	}
	for _, l := range f.logs {
		if l.ID == id {
			return os.WriteFile(l.Path, nil, 0o640)
		}
	}
	return errors.New("no such container")
}

// clock steps a second at each call, so each rotation has its own name.
func clock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func read(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRotateOnce(t *testing.T) {
	dir := t.TempDir()
	big, small := filepath.Join(dir, "big", "0.log"), filepath.Join(dir, "small", "0.log")
	for _, p := range []string{big, small} {
		os.MkdirAll(filepath.Dir(p), 0o755)
	}
	os.WriteFile(small, []byte("0123456789"), 0o640)
	rt := &fakeRuntime{logs: []container.ContainerLog{{ID: "big", Path: big}, {ID: "small", Path: small}}}
	r, err := New(Config{Runtime: rt, MaxSize: 10, MaxFiles: 3, Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	// Four rounds, each after the big container wrote a round's lines.
	for i, round := range []string{"one\n", "two\n", "three\n", "four\n"} {
		if err := os.WriteFile(big, []byte(strings.Repeat(round, 5)), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := r.RotateOnce(context.Background()); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	// Three files: the live log, the newest rotated plain, the one
	// before gzipped; rounds one and two are gone.
	want := []string{"0.log", "0.log.20260102-030408.gz", "0.log.20260102-030409"}
	if got := dirFiles(t, filepath.Dir(big)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", got, want)
	}
	if got := read(t, big); got != "" {
		t.Errorf("live log %q, want the reopened empty file", got)
	}
	if got := read(t, filepath.Join(dir, "big", want[1])); got != strings.Repeat("three\n", 5) {
		t.Errorf("gzipped log %q, want round three", got)
	}
	if got := read(t, filepath.Join(dir, "big", want[2])); got != strings.Repeat("four\n", 5) {
		t.Errorf("newest rotated log %q, want round four", got)
	}
	// A log at the limit is left alone.
	if got := dirFiles(t, filepath.Dir(small)); len(got) != 1 || read(t, small) != "0123456789" {
		t.Errorf("small log: %v", got)
	}
	if strings.Join(rt.reopened, " ") != "big big big big" {
		t.Errorf("reopened %v, want big four times", rt.reopened)
	}
}

func TestRotateOnce_reopenFails(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	os.WriteFile(p, []byte("0123456789abc"), 0o640)
	rt := &fakeRuntime{logs: []container.ContainerLog{{ID: "c", Path: p}}, fail: errors.New("runtime says no")}
	r, _ := New(Config{Runtime: rt, MaxSize: 10, Now: clock()})
	err := r.RotateOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "runtime says no") || !strings.Contains(err.Error(), "container c") {
		t.Errorf("RotateOnce = %v, want the runtime's error naming the container", err)
	}
	// Renamed back: nothing lost, retried next time.
	if got := dirFiles(t, dir); len(got) != 1 || read(t, p) != "0123456789abc" {
		t.Errorf("files %v, content %q; want the log back as it was", got, read(t, p))
	}
}

func TestRotateOnce_leftoversAndMissing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	os.WriteFile(p, []byte("0123456789abc"), 0o640)
	// An interrupted compression and a file compressed but not removed.
	os.WriteFile(p+".20250101-000000.gz.tmp", []byte("partial"), 0o640)
	os.WriteFile(p+".20250101-000001", []byte("old"), 0o640)
	os.WriteFile(p+".20250101-000001.gz", []byte("x"), 0o640)
	missing := filepath.Join(dir, "1.log")
	rt := &fakeRuntime{logs: []container.ContainerLog{{ID: "c", Path: p}, {ID: "m", Path: missing}}}
	r, _ := New(Config{Runtime: rt, MaxSize: 10, MaxFiles: 5, Now: clock()})
	if err := r.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"0.log", "0.log.20250101-000001.gz", "0.log.20260102-030406", "1.log"}
	if got := dirFiles(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v (leftovers removed, the missing log reopened)", got, want)
	}
}

func TestNew_errors(t *testing.T) {
	rt := &fakeRuntime{}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Runtime is required"},
		{Config{Runtime: rt, MaxFiles: 1}, "at least 2, not 1"},
		{Config{Runtime: rt, MaxSize: -1}, "max size -1 is negative"},
	} {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	r, err := New(Config{Runtime: rt})
	if err != nil || r.cfg.MaxSize != DefaultMaxSize || r.cfg.MaxFiles != DefaultMaxFiles || r.cfg.Period != DefaultPeriod {
		t.Errorf("defaults: %+v, %v", r.cfg, err)
	}
}
