package residency

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestTrim trims this test binary: its read-only mappings get the
// random-read advice (VmFlags "rr"), lose their resident pages, and the
// code in them still runs.
func TestTrim(t *testing.T) {
	res, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	if res.Mappings == 0 {
		t.Fatal("no mapping of the test binary advised")
	}
	if res.After >= res.Before {
		t.Errorf("resident %d bytes after, %d before: nothing dropped", res.After, res.Before)
	}
	ms, err := selfMappings()
	if err != nil {
		t.Fatal(err)
	}
	flags, err := vmFlags()
	if err != nil {
		t.Fatal(err)
	}
	advised := 0
	for _, m := range ms {
		if !m.Droppable() {
			continue
		}
		if !strings.Contains(" "+flags[m.Start]+" ", " rr ") {
			t.Errorf("mapping %#x (%s) has VmFlags %q, no rr", m.Start, m.Perms, flags[m.Start])
		}
		advised++
	}
	if advised != res.Mappings {
		t.Errorf("%d droppable mappings, Trim advised %d", advised, res.Mappings)
	}
	// Twice is as good as once.
	if _, err := Trim(); err != nil {
		t.Fatal(err)
	}
}

// vmFlags maps each mapping's start address to its VmFlags.
func vmFlags() (map[uintptr]string, error) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	out := map[uintptr]string{}
	var cur uintptr
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if isRangeField(f[0]) {
			ms, err := ParseSmaps(strings.NewReader(line+"\n"), f[3], inodeOf(f))
			if err == nil && len(ms) == 1 {
				cur = ms[0].Start
			}
			continue
		}
		if f[0] == "VmFlags:" {
			out[cur] = strings.Join(f[1:], " ")
		}
	}
	return out, nil
}

func inodeOf(f []string) uint64 {
	var n uint64
	for _, c := range f[4] {
		n = n*10 + uint64(c-'0')
	}
	return n
}

// TestKeep: a pass at once and one each period until the context ends;
// with no period, the one pass only.
func TestKeep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	passes := make(chan int, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Keep(ctx, time.Millisecond, func(pass int, res Result, err error) {
			if err != nil || res.Mappings == 0 {
				t.Errorf("pass %d: %+v, %v", pass, res, err)
			}
			passes <- pass
			if pass == 3 {
				cancel()
			}
		})
	}()
	<-done
	close(passes)
	var got []int
	for p := range passes {
		got = append(got, p)
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("passes %v, want [1 2 3] and none after the context ended", got)
	}
	n := 0
	Keep(context.Background(), 0, func(pass int, _ Result, _ error) { n++ })
	if n != 1 {
		t.Fatalf("no period: %d passes, want 1", n)
	}
}
