// Command pause is the sandbox ("pause") image of wasmlet's end-to-end tests:
// containerd holds each pod's namespaces with it. It is built statically
// (CGO_ENABLED=0) by hack/e2e.sh because no registry is reachable in CI.
//
// As PID 1 of a sandbox it reaps every child that is re-parented to it and
// exits 0 on SIGTERM or SIGINT, like Kubernetes' own pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
