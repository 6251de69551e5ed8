package config

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// StaticOptions says where a static pod came from, for ApplyStaticDefaults.
type StaticOptions struct {
	// NodeName is this node's name.
	NodeName string
	// Location is the manifest's file path or URL.
	Location string
	// File is true for a manifest file, false for a URL.
	File bool
}

// ApplyStaticDefaults turns a decoded manifest into a static pod the way the
// kubelet's file and URL sources do: a UID that is the config hash (32 hex
// digits of MD5 over the manifest, the node name and the location, so it is
// stable across restarts and changes with the content), the node name as a
// name suffix, namespace "default" when empty, spec.nodeName, the
// kubernetes.io/config.hash annotation, a NoExecute toleration of any taint,
// and phase Pending. A UID given in the manifest is kept. It then applies
// ApplyPodDefaults.
func ApplyStaticDefaults(pod *v1.Pod, o StaticOptions) error {
	if pod.UID == "" {
		b, err := json.Marshal(pod)
		if err != nil {
			return fmt.Errorf("hash pod %s: %w", pod.Name, err)
		}
		h := md5.New()
		h.Write(b)
		if o.File {
			fmt.Fprintf(h, "host:%s", o.NodeName)
			fmt.Fprintf(h, "file:%s", o.Location)
		} else {
			fmt.Fprintf(h, "url:%s", o.Location)
		}
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	if o.NodeName != "" {
		pod.Name = pod.Name + "-" + strings.ToLower(o.NodeName)
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = o.NodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationHash] = string(pod.UID)
	if o.File {
		tolerateNoExecute(pod)
	}
	pod.Status.Phase = v1.PodPending
	ApplyPodDefaults(pod)
	return nil
}

func tolerateNoExecute(pod *v1.Pod) {
	t := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	for _, x := range pod.Spec.Tolerations {
		if x.Key == "" && x.Operator == t.Operator && x.Effect == t.Effect {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

// ApplyPodDefaults fills in the API server's defaults the agent and the
// runtime rely on, for pods that never went through an API server:
// restartPolicy Always, terminationGracePeriodSeconds 30, dnsPolicy
// ClusterFirst, schedulerName default-scheduler, an empty securityContext,
// enableServiceLinks; per container terminationMessagePath
// /dev/termination-log, terminationMessagePolicy File, imagePullPolicy
// (Always for :latest or no tag, else IfNotPresent), port protocol TCP,
// host ports equal to container ports on the host network, requests equal to
// limits where only limits are set, and probe timings. It is idempotent.
func ApplyPodDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		t := v1.DefaultEnableServiceLinks
		s.EnableServiceLinks = &t
	}
	for i := range s.InitContainers {
		containerDefaults(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		containerDefaults(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.Volumes {
		if s.Volumes[i].VolumeSource == (v1.VolumeSource{}) {
			s.Volumes[i].EmptyDir = &v1.EmptyDirVolumeSource{}
		}
	}
}

func containerDefaults(c *v1.Container, hostNetwork bool) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultPullPolicy(c.Image)
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for n, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[n]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = v1.ResourceList{}
			}
			c.Resources.Requests[n] = q.DeepCopy()
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
	}
}

// DefaultPullPolicy is the API server's default image pull policy: Always
// for an image tagged latest or not tagged at all (and without a digest),
// else IfNotPresent.
func DefaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	if i < 0 || name[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
