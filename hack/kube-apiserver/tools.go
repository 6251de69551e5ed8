//go:build tools

// Package tools pins k8s.io/kubernetes/cmd/kube-apiserver in this nested
// build module so `go mod tidy` keeps its requirements. The module exists only
// to build a real kube-apiserver for the apiserver end-to-end suite
// (hack/kube-apiserver/build.sh); it is outside the project's ./... because it
// has its own go.mod.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
