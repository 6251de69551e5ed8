//go:build !linux

package residency

import "errors"

// Trim is Linux-only: elsewhere it does nothing and says so.
func Trim() (Result, error) {
	return Result{}, errors.New("residency: only on Linux")
}

func executableID() (string, uint64, error) { return "", 0, errors.New("residency: only on Linux") }
