// Package regularfile reads files a directory watcher found, safely: only
// regular files, opened without blocking, so a FIFO, socket or device put in
// a watched directory can never block the reader, and never more than a
// bound.
package regularfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read returns the content of the regular file at path (a symlink to one
// included), at most max bytes of it. It opens without blocking and checks
// the opened file, so a path swapped for a FIFO after it was listed is
// refused, never waited on; a larger file is an error.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}
