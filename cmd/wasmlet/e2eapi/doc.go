// Package e2eapi is wasmlet's end-to-end suite against a real Kubernetes
// control plane: etcd and kube-apiserver v1.36.3 on loopback with
// NodeRestriction and Node,RBAC authorization (hack/apiserver/cluster.sh).
// wasmlet runs with a node client certificate (system:node:<name>), as a
// kubelet would; the suite looks at the cluster through a client-go admin
// client, as a cluster user does.
//
// The tests carry the build tag e2e_apiserver, so `go test ./...` does not
// run them; hack/e2e-apiserver.sh builds everything, starts the control
// plane and a runtime (the embedded WASI runtime, then containerd), and runs
//
//	e2eapi.test -runtime embedded|containerd -endpoint unix://… -cluster DIR -wasmlet bin/wasmlet …
//
// The flags, the agent process and the waits it shares with cmd/wasmlet/e2e
// are package cmd/wasmlet/e2e/harness.
package e2eapi
