package runtime

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/dump"
)

// The kubelet's CRI labels and annotations, so ctr/crictl users see what
// they know.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	// LabelManaged marks the sandboxes and containers wasmlet created, so
	// it never touches other clients' objects in the same runtime.
	LabelManaged = "io.wasmlet.managed"

	AnnotationContainerHash          = "io.kubernetes.container.hash"
	AnnotationRestartCount           = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationPolicy      = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPreStopHandler         = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts         = "io.kubernetes.container.ports"
	AnnotationGracePeriod            = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationDeletionGracePeriod    = "io.kubernetes.pod.deletionGracePeriod"
)

func sandboxLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+4)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	l[LabelManaged] = "true"
	return l
}

func containerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
		LabelManaged:       "true",
	}
}

func containerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:          HashContainer(c),
		AnnotationRestartCount:           strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath: c.TerminationMessagePath,
		AnnotationTerminationPolicy:      string(c.TerminationMessagePolicy),
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(b)
		}
	}
	return a
}

// HashContainer is the container hash kept in the
// io.kubernetes.container.hash annotation, computed as the kubelet
// computes it (FNV-32a over the hash dump of the JSON of the container's
// name and image, in hex), so the same container gets the same hash from
// either agent. A running container whose hash differs from its spec's is
// restarted: only a new image restarts it, as under the kubelet (the
// other fields of an API pod's containers cannot change; a static pod
// that changes gets a new UID).
func HashContainer(c *v1.Container) string {
	b, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image}) // a map of strings always marshals
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(b))
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// podRef reads the pod's identity from an object's labels.
func podRef(labels map[string]string) (types.UID, string, string) {
	return types.UID(labels[LabelPodUID]), labels[LabelPodName], labels[LabelPodNamespace]
}

func restartCountOf(annotations map[string]string) int {
	n, _ := strconv.Atoi(annotations[AnnotationRestartCount])
	return n
}
