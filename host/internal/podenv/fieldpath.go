package podenv

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilnet "k8s.io/utils/net"
)

// FieldValue is the value of a downward-API fieldRef of pod, as the
// kubelet gives it to an env var: metadata.name, metadata.namespace,
// metadata.uid, metadata.labels and metadata.annotations (FormatMap
// text), metadata.labels['key'] and metadata.annotations['key'] (empty
// when absent), spec.nodeName (or its old name spec.host),
// spec.serviceAccountName, status.hostIP and status.hostIPs (from hostIPs,
// comma-joined), status.podIP and status.podIPs (from podIPs, the
// sandbox's; the first IP of the node's family comes first, at most one
// of each family, as the kubelet orders them). Any other path is an error
// naming it.
func FieldValue(pod *v1.Pod, fieldPath string, podIPs, hostIPs []string) (string, error) {
	if path, key, ok := splitSubscript(fieldPath); ok {
		switch path {
		case "metadata.labels":
			if errs := validation.IsQualifiedName(key); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Labels[key], nil
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("field label does not support subscript: %s", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "spec.nodeName", "spec.host":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(hostIPs) == 0 {
			return "", fmt.Errorf("host IP unknown")
		}
		return hostIPs[0], nil
	case "status.hostIPs":
		if len(hostIPs) == 0 {
			return "", fmt.Errorf("host IP unknown")
		}
		return strings.Join(hostIPs, ","), nil
	case "status.podIP":
		ips := sortPodIPs(podIPs, hostIPs)
		if len(ips) == 0 {
			return "", nil
		}
		return ips[0], nil
	case "status.podIPs":
		return strings.Join(sortPodIPs(podIPs, hostIPs), ","), nil
	case "spec.restartPolicy", "spec.schedulerName", "status.phase":
		// Field labels the API knows that the kubelet cannot give.
		return "", fmt.Errorf("unsupported fieldPath: %v", fieldPath)
	}
	return "", fmt.Errorf("field label not supported: %s", fieldPath)
}

// FormatMap is the downward API's text of a label or annotation map: one
// key="value" line per entry, keys sorted, values quoted with Go's
// escaping, lines joined by "\n" with no final newline.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for i, k := range keys {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, m[k])
	}
	return string(b)
}

// splitSubscript splits "path['key']" into path and key.
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	s, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return fieldPath, "", false
	}
	path, key, found = strings.Cut(s, "['")
	if !found || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// sortPodIPs orders the pod's IPs as the kubelet does for the downward
// API: the first IP of the node's primary family (that of its first IP;
// IPv4 when unknown), then the first of the other family. IPs are
// re-formatted; what does not parse is dropped.
func sortPodIPs(podIPs, hostIPs []string) []string {
	primary, secondary := utilnet.IsIPv4, utilnet.IsIPv6
	if len(hostIPs) > 0 && utilnet.IsIPv6String(hostIPs[0]) {
		primary, secondary = secondary, primary
	}
	ips := make([]string, 0, 2)
	for _, family := range []func(net.IP) bool{primary, secondary} {
		for _, s := range podIPs {
			if ip := utilnet.ParseIPSloppy(s); ip != nil && family(ip) {
				ips = append(ips, ip.String())
				break
			}
		}
	}
	return ips
}
