// Package v1alpha1 is the wasmlet.dev/v1alpha1 API: the cluster's
// declaration of the plugins its wasmlet nodes enforce (WasmletPlugin) and
// each node's report of what it enforces (WasmletNode). Both are
// cluster-scoped custom resources; their CRDs are in deploy/.
//
// A WasmletPlugin carries what a reference manifest (abi.Manifest with
// image set) carries on a node — the image, the signatures it must carry,
// the node's config, mode, failure policy, order and permission grant —
// plus a node selector. Every node whose labels match pulls, verifies and
// loads it. A WasmletNode, named after its node, is written by that node
// only, and only when its content changes.
package v1alpha1
