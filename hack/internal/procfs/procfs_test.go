package procfs

import (
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     Usage
		err      string
	}{
		{"plain", "42 (wasmlet) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 12 0 100 0 0", Usage{CPU: 3, ChildrenCPU: 0.1}, ""},
		{"name with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 100 100 0 0 20 0 1 0 1 0 0", Usage{CPU: 2}, ""},
		{"short", "7 (x) R 1 2 3", Usage{}, "fields after the command name"},
		{"no name", "7 x R", Usage{}, "no command name"},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 zz 100 0 0 20", Usage{}, "field 14"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStat(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestStatusBytes(t *testing.T) {
	const status = "Name:\tx\nVmPeak:\t 9 kB\nVmRSS:\t  1024 kB\nRssAnon:\t   512 kB\nThreads: 3\n"
	for _, c := range []struct {
		name, in, field string
		want            int64
		err             string
	}{
		{"VmRSS", status, "VmRSS", 1 << 20, ""},
		{"RssAnon", status, "RssAnon", 512 << 10, ""},
		{"kernel thread", "Name:\tkthreadd\nThreads:\t1\n", "VmRSS", 0, "no VmRSS"},
		{"bad unit", "VmRSS:\t12 MB\n", "VmRSS", 0, "want N kB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := StatusBytes(c.in, c.field)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

func TestRead(t *testing.T) {
	u, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.Anon <= 0 || u.Anon > u.RSS {
		t.Errorf("RSS of this test %d, anonymous %d: want 0 < anonymous <= RSS", u.RSS, u.Anon)
	}
	if _, err := Read(-1); err == nil {
		t.Error("Read(-1) succeeded")
	}
}

func TestMemAvailable(t *testing.T) {
	v, err := MemAvailable()
	if err != nil || v <= 0 {
		t.Errorf("MemAvailable() = %d, %v; want a positive size", v, err)
	}
}
