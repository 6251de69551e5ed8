// Package diskusage measures what a directory holds on disk as the
// kubelet's du-based volume metrics do (pkg/volume/util/fs.DiskUsage):
// the blocks allocated to every file and directory under it, and the
// distinct inodes they are. The stats summary measures pod volumes and
// logs with it, the embedded WASI runtime its containers' scratch roots.
package diskusage

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Usage is what a path holds.
type Usage struct {
	// Bytes is the sum of the allocated blocks (st_blocks × 512).
	Bytes uint64
	// Inodes counts the distinct inodes (a hard link once).
	Inodes uint64
}

// Walk measures path and everything under it, not following symlinks. A
// path that does not exist is an error; entries that vanish during the
// walk are skipped.
func Walk(path string) (Usage, error) {
	var u Usage
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			if p != path && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		k := inode{uint64(st.Dev), st.Ino}
		if seen[k] {
			return nil
		}
		seen[k] = true
		u.Inodes++
		u.Bytes += uint64(st.Blocks) * 512
		return nil
	})
	return u, err
}
