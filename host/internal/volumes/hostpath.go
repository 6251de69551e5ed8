package volumes

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// ensureHostPath checks (or, for the ...OrCreate types, makes) a hostPath
// volume's path per its type, as the kubelet's hostPath plugin does.
func ensureHostPath(hp *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(hp.Path, 0o755); err != nil {
				return err
			}
			return nil
		}
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", hp.Path)
		}
		return err
	case v1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if err == nil && fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", hp.Path)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %w", err)
	}
	var ok bool
	switch t {
	case v1.HostPathDirectory:
		ok = fi.IsDir()
	case v1.HostPathFile:
		ok = fi.Mode().IsRegular()
	case v1.HostPathSocket:
		ok = fi.Mode()&os.ModeSocket != 0
	case v1.HostPathCharDev:
		ok = fi.Mode()&os.ModeCharDevice != 0
	case v1.HostPathBlockDev:
		ok = fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
	default:
		return fmt.Errorf("hostPath type %q is not known", t)
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", hp.Path, t)
	}
	return nil
}
