package volumes

import (
	"io/fs"
	"syscall"
)

func fileGID(fi fs.FileInfo) int64 {
	return int64(fi.Sys().(*syscall.Stat_t).Gid)
}
