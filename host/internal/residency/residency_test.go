package residency

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const smaps = `00400000-02752000 r-xp 00000000 fe:00 42                            /usr/bin/wasmlet
Size:              36168 kB
Rss:               22400 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
02752000-05308000 r--p 02352000 fe:00 42                            /usr/bin/wasmlet
Size:              44760 kB
Rss:               32016 kB
Anonymous:             8 kB
VmFlags: rd mr mw me
05308000-053eb000 rw-p 04f08000 fe:00 42                            /usr/bin/wasmlet
Rss:                 844 kB
Anonymous:           300 kB
7f4eca63d000-7f4eca7bd000 rw-p 00000000 00:00 0
Rss:                1532 kB
7f4f1bcf6000-7f4f1be4c000 r-xp 00026000 fe:00 99                     /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 808 kB
Anonymous:             0 kB
`

func TestParseSmaps(t *testing.T) {
	ms, err := ParseSmaps(strings.NewReader(smaps), "fe:00", 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("got %d mappings of the file, want its 3 (not libc's, not the anonymous one): %+v", len(ms), ms)
	}
	want := []Mapping{
		{Start: 0x400000, End: 0x2752000, Perms: "r-xp", Rss: 22400 << 10, Dev: "fe:00", Inode: 42},
		{Start: 0x2752000, End: 0x5308000, Perms: "r--p", Rss: 32016 << 10, Anonymous: 8 << 10, Dev: "fe:00", Inode: 42},
		{Start: 0x5308000, End: 0x53eb000, Perms: "rw-p", Rss: 844 << 10, Anonymous: 300 << 10, Dev: "fe:00", Inode: 42},
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, ms[i], want[i])
		}
	}
	if got := resident(ms); got != (22400+32016+844)<<10 {
		t.Errorf("resident = %d", got)
	}
	// Only a read-only mapping with no private copy can be read from the
	// file again.
	for i, d := range []bool{true, false, false} {
		if ms[i].Droppable() != d {
			t.Errorf("mapping %d (%s, anonymous %d): Droppable = %v, want %v", i, ms[i].Perms, ms[i].Anonymous, !d, d)
		}
	}
}

func TestParseSmaps_malformed(t *testing.T) {
	for _, in := range []string{
		"00400000-02752000 r-xp 00000000 fe:00\n",
		"00400000-02752000 r-xp 00000000 fe:00 x /bin\n",
		"02752000-00400000 r-xp 00000000 fe:00 42 /bin\n",
		"00400000-02752000 r-xp 00000000 fe:00 42 /bin\nRss: many kB\n",
	} {
		if _, err := ParseSmaps(strings.NewReader(in), "fe:00", 42); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// TestKeep_stopsOnFailure: a failed pass is reported and ends the passes,
// at the first pass as at a later one.
func TestKeep_stopsOnFailure(t *testing.T) {
	for _, failAt := range []int{1, 3} {
		calls := 0
		trim := func() (Result, error) {
			calls++
			if calls == failAt {
				return Result{}, errors.New("refused")
			}
			return Result{Mappings: 1}, nil
		}
		var passes []int
		var failed error
		ctx, cancel := context.WithCancel(context.Background())
		keep(ctx, time.Millisecond, trim, func(pass int, _ Result, err error) {
			passes = append(passes, pass)
			if pass > failAt {
				cancel() // passes went on after the failure: end them
			}
			if err != nil {
				failed = err
			}
		})
		cancel()
		if calls != failAt || len(passes) != failAt || failed == nil {
			t.Fatalf("failing at pass %d: %d calls, passes %v, error %v; want the passes to end there, the error reported", failAt, calls, passes, failed)
		}
	}
}
