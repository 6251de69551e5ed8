//go:build wasip1

package main

import "errors"

// whoami needs sockets, which a wasip1 module does not have.
func whoami(string) (string, error) {
	return "", errors.New("whoami: not available in the wasip1 build")
}
