//go:build tools

// Package tools pins the Kubernetes programs this nested build module builds
// (hack/kube/build.sh) so `go mod tidy` keeps their requirements: the control
// plane for the apiserver end-to-end suite and the conformance cluster, the
// real kubelet as the conformance reference node, kubemark's hollow node
// for the fleet benchmark, kubectl, the upstream e2e
// suite, the node conformance suite (test/e2e_node) and the programs of
// their images (agnhost, nonewprivs' nnp). The module is outside the project's ./...
// because it has its own go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubemark"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e_node"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
