//go:build !wasip1

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// onTerm calls f when the process receives SIGTERM.
func onTerm(f func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		<-ch
		f()
	}()
}
