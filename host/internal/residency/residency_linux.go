package residency

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Trim advises random access for each read-only mapping of this process's
// executable that holds no private copy, and drops its page-table
// entries. It is safe to call at any time and more than once.
func Trim() (Result, error) {
	ms, err := selfMappings()
	if err != nil {
		return Result{}, err
	}
	res := Result{Before: resident(ms)}
	var advised []Mapping
	for _, m := range ms {
		if !m.Droppable() {
			continue
		}
		if err := madvise(m, unix.MADV_RANDOM); err != nil {
			return res, err
		}
		if err := madvise(m, unix.MADV_DONTNEED); err != nil {
			return res, err
		}
		advised = append(advised, m)
	}
	res.Mappings = len(advised)
	after, err := selfMappings()
	if err != nil {
		return res, err
	}
	for _, m := range after {
		if m.Droppable() {
			res.After += m.Rss
		}
	}
	return res, nil
}

// madvise gives advice for the whole of m.
func madvise(m Mapping, advice int) error {
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, uintptr(advice))
	if errno != 0 {
		return fmt.Errorf("residency: madvise %#x-%#x (%s): %w", m.Start, m.End, m.Perms, errno)
	}
	return nil
}

// executableID is the device ("fe:00", as smaps writes it) and inode of
// this process's executable.
func executableID() (string, uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return "", 0, fmt.Errorf("residency: %w", &os.PathError{Op: "stat", Path: "/proc/self/exe", Err: err})
	}
	return fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev)), st.Ino, nil
}
