// Package e2e is wasmlet's end-to-end suite: it drives the built binary
// (`wasmlet run`) as a user does — static pod manifests in a directory, the
// read-only server's /pods, /healthz and /metrics, log files under the pod
// logs directory — against a real runtime, and checks the runtime's own view
// with a bare CRI client (package cri).
//
// The tests carry the build tag e2e, so `go test ./...` on a machine without
// a runtime does not run them. hack/e2e.sh builds the images, starts a
// private containerd (and the embedded runtime), and runs
//
//	e2e.test -runtime containerd|embedded -endpoint unix://… -wasmlet bin/wasmlet …
//
// The same cases run against both runtimes because the workload, testbox, is
// one program built natively and for wasip1; a case that cannot apply to a
// runtime (a graceful SIGTERM on WASI, restarting containerd) is not
// registered for it, and the suite logs one line naming those left out.
// What this suite shares with cmd/wasmlet/e2eapi (flags, the agent process,
// waits) is package harness.
package e2e
