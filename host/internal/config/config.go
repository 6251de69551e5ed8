// Package config gathers pods from the agent's sources and merges them into
// one stream of typed updates, with the kubelet's op model and merge rules
// (pkg/kubelet/config): each source keeps its own set of pods; a SET from a
// source replaces that set and is turned into ADD, UPDATE, DELETE and REMOVE
// updates for the pods that changed; a change of status only becomes
// RECONCILE; a pod whose DeletionTimestamp is set becomes DELETE. A source is
// "seen" once its first update has been delivered, and SeenAllSources tells
// the agent when cleanup of pods no source knows is safe.
package config

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Op is the operation of a PodUpdate, the kubelet's op model
// (kubetypes.PodOperation), with the kubelet's names. It is the core's own
// type: a source plugin's operations (abi.Op) are translated by
// host/internal/extension.
type Op string

// The operations. Sources send SET, ADD, UPDATE, REMOVE and DELETE; the merged
// stream carries ADD, UPDATE, REMOVE, DELETE and RECONCILE (never SET).
const (
	// OpSet replaces the source's whole set of pods.
	OpSet Op = "SET"
	// OpAdd adds pods.
	OpAdd Op = "ADD"
	// OpUpdate changes pods.
	OpUpdate Op = "UPDATE"
	// OpRemove kills pods at once (with their grace period) and forgets
	// them.
	OpRemove Op = "REMOVE"
	// OpDelete is graceful deletion (DeletionTimestamp set), handled like an
	// update.
	OpDelete Op = "DELETE"
	// OpReconcile carries pods of which only the status changed; only the
	// merge produces it.
	OpReconcile Op = "RECONCILE"
)

// Well-known source names; a source plugin uses its own name.
const (
	// FileSource is the static pod directory.
	FileSource = "file"
	// HTTPSource is a manifest URL (the kubelet's --manifest-url).
	HTTPSource = "http"
	// APIServerSource is a Kubernetes API server.
	APIServerSource = "api"
)

// The kubelet's config annotations, set on every pod that passes the merge.
const (
	// AnnotationSource names the source a pod came from ("file", "http",
	// "api", or a plugin's name).
	AnnotationSource = "kubernetes.io/config.source"
	// AnnotationHash is the hash of a static pod's manifest (its UID).
	AnnotationHash = "kubernetes.io/config.hash"
	// AnnotationSeen is when the agent first saw the pod, RFC 3339 with
	// nanoseconds.
	AnnotationSeen = "kubernetes.io/config.seen"
	// AnnotationMirror marks a mirror pod (the API server's copy of a
	// static pod); its value is the static pod's hash.
	AnnotationMirror = "kubernetes.io/config.mirror"
)

// PodUpdate is one typed operation on pods from one source.
type PodUpdate struct {
	// Op is the operation.
	Op Op
	// Source names the source the pods come from.
	Source string
	// Pods are the pods concerned. Pods on the merged stream are the
	// receiver's own copies.
	Pods []*v1.Pod
}

// Source produces pod updates. The file source is built in; a Wasm source
// plugin implements the same interface.
type Source interface {
	// Name is the source's name, stamped on every pod as
	// kubernetes.io/config.source. It must be unique among the sources.
	Name() string
	// Run sends updates until ctx is done, then returns. The Source field of
	// a sent update is ignored (Name is used). A source should send a SET
	// with its complete set first, even an empty one, so the agent learns
	// the source is ready.
	Run(ctx context.Context, updates chan<- PodUpdate) error
}

// FullName is the kubelet's pod full name, "<name>_<namespace>".
func FullName(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace
}

// IsStatic reports whether the pod came from a source other than the API
// server (a static pod).
func IsStatic(pod *v1.Pod) bool {
	s, ok := pod.Annotations[AnnotationSource]
	return ok && s != APIServerSource
}

// IsMirror reports whether the pod is a mirror pod.
func IsMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[AnnotationMirror]
	return ok
}

// Validate rejects pods the agent cannot run; the merge skips them with a log
// line naming the pod and the source.
func Validate(pod *v1.Pod) error {
	if pod.Name == "" {
		return fmt.Errorf("metadata.name is empty")
	}
	if pod.UID == "" {
		return fmt.Errorf("pod %s: metadata.uid is empty", FullName(pod))
	}
	if len(pod.Spec.Containers) == 0 {
		return fmt.Errorf("pod %s: spec.containers is empty", FullName(pod))
	}
	names := map[string]bool{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == "" {
				return fmt.Errorf("pod %s: a container has no name", FullName(pod))
			}
			if names[c.Name] {
				return fmt.Errorf("pod %s: container name %q is used twice", FullName(pod), c.Name)
			}
			names[c.Name] = true
			if c.Image == "" {
				return fmt.Errorf("pod %s: container %q has no image", FullName(pod), c.Name)
			}
		}
	}
	return nil
}
