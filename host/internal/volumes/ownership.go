package volumes

import (
	"io/fs"
	"os"
	"path/filepath"
)

// The permission bits fsGroup ownership adds, as the kubelet's
// SetVolumeOwnership does: group read (and write, for writable volumes)
// on everything, group search and setgid on directories.
const (
	roGroupMask fs.FileMode = 0o440
	rwGroupMask fs.FileMode = 0o660
	dirMask     fs.FileMode = 0o110 | fs.ModeSetgid
)

// setOwnership gives everything under root (root included, symlinks not
// followed) the group gid and the group bits of the kubelet's fsGroup
// ownership: readOnly volumes get group read, others group read-write.
func setOwnership(root string, gid int64, readOnly bool) error {
	mask := rwGroupMask
	if readOnly {
		mask = roGroupMask
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= dirMask
		}
		return os.Chmod(path, info.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky)|m)
	})
}
