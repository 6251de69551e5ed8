// Package residency keeps the agent's resident set to the pages of its
// binary it uses. A Go binary's code and read-only data are one large file
// mapping; on a read fault Linux maps not only the page touched but the
// pages around it already in the page cache (fault-around, 64 KiB by
// default), so a process that touches a few pages in each of a thousand
// places scattered over an 80 MB binary shows most of it as resident.
// Trim, called once the agent has started (its start-up code has run, and
// the kernel's read-ahead has read what it needed), advises random access
// for the binary's read-only mappings, which turns read-ahead (and, on
// kernels that honour the advice there, fault-around) off for them, and
// drops their page-table entries, so from then on a page of the binary is
// resident only once it is touched again. Keep repeats it every period, so
// what stays resident is what the agent touched in the last period, not
// every page any rare path (a pod's first start, an error) ever touched.
//
// The page cache is not changed: the binary's pages stay cached, shared
// with any other process that maps them, and are read from it again on the
// next touch (a minor fault). A mapping that holds private copies of pages
// (a relocated one, in a position-independent binary) is left mapped: its
// pages cannot be read from the file again.
package residency

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultPeriod is how often Keep trims again: long beside the agent's own
// periods (10 s and shorter), so the pages of its steady work come back
// once a minute with a minor fault each.
const DefaultPeriod = time.Minute

// Keep trims at once and then every period until ctx is done (only once
// when period is not positive); report receives each pass's result or
// error, numbered from 1. A pass that fails ends it: what fails once (no
// such platform, an advice the kernel refuses) fails every time, and the
// mappings stay as they were.
func Keep(ctx context.Context, period time.Duration, report func(pass int, res Result, err error)) {
	keep(ctx, period, Trim, report)
}

// keep is Keep with its trim given.
func keep(ctx context.Context, period time.Duration, trim func() (Result, error), report func(pass int, res Result, err error)) {
	res, err := trim()
	report(1, res, err)
	if err != nil || period <= 0 {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for pass := 2; ; pass++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		res, err := trim()
		report(pass, res, err)
		if err != nil {
			return
		}
	}
}

// Mapping is one file mapping of the binary, as /proc/self/smaps shows it.
type Mapping struct {
	// Start and End are the mapping's addresses, End exclusive.
	Start, End uintptr
	// Perms is the mapping's permissions ("r-xp", "r--p" …).
	Perms string
	// Rss is the mapping's resident bytes.
	Rss uint64
	// Anonymous is the bytes of private copies in it (written pages).
	Anonymous uint64
	// Dev and Inode name the mapped file ("fe:00" and its inode number).
	Dev   string
	Inode uint64
}

// Droppable reports whether the mapping's page-table entries can be
// dropped and its pages read from the file again: it is not writable and
// holds no private copy.
func (m Mapping) Droppable() bool {
	return len(m.Perms) == 4 && m.Perms[0] == 'r' && m.Perms[1] == '-' && m.Anonymous == 0
}

// Result is what Trim did.
type Result struct {
	// Mappings are the binary's mappings Trim advised.
	Mappings int
	// Before and After are the binary's resident bytes in those mappings
	// before and after.
	Before, After uint64
}

// ParseSmaps reads the mappings of one file (dev, inode) from smaps text.
func ParseSmaps(r io.Reader, dev string, inode uint64) ([]Mapping, error) {
	var out []Mapping
	var cur *Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if isRangeField(f[0]) {
			cur = nil
			if len(f) < 5 {
				return nil, fmt.Errorf("residency: smaps: malformed mapping line %q", line)
			}
			ino, err := strconv.ParseUint(f[4], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("residency: smaps: inode of %q: %w", line, err)
			}
			if f[3] != dev || ino != inode {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("residency: smaps: address range of %q", line)
			}
			out = append(out, Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1], Dev: f[3], Inode: ino})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Rss:", "Anonymous:":
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("residency: smaps: %q: %w", line, err)
			}
			if f[0] == "Rss:" {
				cur.Rss = kb * 1024
			} else {
				cur.Anonymous = kb * 1024
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("residency: smaps: %w", err)
	}
	return out, nil
}

// isRangeField reports whether s is an smaps mapping line's first field
// ("7f00-7f10"), not a "Key:" field.
func isRangeField(s string) bool {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok || lo == "" || hi == "" {
		return false
	}
	for _, c := range lo + hi {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// selfMappings reads this process's mappings of its own executable.
func selfMappings() ([]Mapping, error) {
	dev, inode, err := executableID()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("residency: %w", err)
	}
	return ParseSmaps(bytes.NewReader(b), dev, inode)
}

// resident sums the resident bytes of the mappings.
func resident(ms []Mapping) uint64 {
	var n uint64
	for _, m := range ms {
		n += m.Rss
	}
	return n
}
