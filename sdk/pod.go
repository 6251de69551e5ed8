package sdk

// The types below are the subset of Kubernetes' v1.Pod and v1.Node that node
// policies look at, with the same field names and JSON names as k8s.io/api so
// a policy reads like one written against client-go. Fields Kubernetes makes
// optional pointers stay pointers (nil means "not set"); the nil-safe helper
// methods answer the usual questions without nil checks.

// Pod is a v1.Pod, reduced to what node policies need.
type Pod struct {
	// ObjectMeta is the pod's metadata.
	ObjectMeta `json:"metadata"`
	// Spec is the pod's desired state.
	Spec PodSpec `json:"spec"`
	// Status is the pod's observed state (phase only).
	Status PodStatus `json:"status"`
}

// ObjectMeta is a v1.ObjectMeta, reduced.
type ObjectMeta struct {
	// Name of the object.
	Name string `json:"name"`
	// GenerateName is the prefix the name was generated from.
	GenerateName string `json:"generateName"`
	// Namespace of the object.
	Namespace string `json:"namespace"`
	// UID of the object.
	UID string `json:"uid"`
	// Labels of the object.
	Labels map[string]string `json:"labels"`
	// Annotations of the object.
	Annotations map[string]string `json:"annotations"`
	// OwnerReferences name the objects that own this one.
	OwnerReferences []OwnerReference `json:"ownerReferences"`
}

// OwnerReference is a v1.OwnerReference, reduced.
type OwnerReference struct {
	// APIVersion of the owner.
	APIVersion string `json:"apiVersion"`
	// Kind of the owner, e.g. "ReplicaSet".
	Kind string `json:"kind"`
	// Name of the owner.
	Name string `json:"name"`
	// UID of the owner.
	UID string `json:"uid"`
	// Controller is true for the managing controller.
	Controller *bool `json:"controller"`
}

// PodSpec is a v1.PodSpec, reduced.
type PodSpec struct {
	// Volumes of the pod.
	Volumes []Volume `json:"volumes"`
	// InitContainers run in order before the app containers.
	InitContainers []Container `json:"initContainers"`
	// Containers are the app containers.
	Containers []Container `json:"containers"`
	// EphemeralContainers are debugging containers added to a running pod.
	EphemeralContainers []Container `json:"ephemeralContainers"`
	// RestartPolicy is Always, OnFailure or Never.
	RestartPolicy string `json:"restartPolicy"`
	// NodeSelector must match the node's labels.
	NodeSelector map[string]string `json:"nodeSelector"`
	// ServiceAccountName is the pod's service account.
	ServiceAccountName string `json:"serviceAccountName"`
	// NodeName is the node the pod is bound to.
	NodeName string `json:"nodeName"`
	// HostNetwork uses the node's network namespace.
	HostNetwork bool `json:"hostNetwork"`
	// HostPID uses the node's PID namespace.
	HostPID bool `json:"hostPID"`
	// HostIPC uses the node's IPC namespace.
	HostIPC bool `json:"hostIPC"`
	// SecurityContext holds pod-level security settings.
	SecurityContext *PodSecurityContext `json:"securityContext"`
	// Tolerations of the pod.
	Tolerations []Toleration `json:"tolerations"`
	// PriorityClassName names the pod's priority class.
	PriorityClassName string `json:"priorityClassName"`
	// Priority is the resolved priority value.
	Priority *int32 `json:"priority"`
	// RuntimeClassName names the pod's runtime class.
	RuntimeClassName *string `json:"runtimeClassName"`
}

// Container is a v1.Container (or the common part of a v1.EphemeralContainer),
// reduced.
type Container struct {
	// Name of the container.
	Name string `json:"name"`
	// Image reference.
	Image string `json:"image"`
	// Command overrides the image's entrypoint.
	Command []string `json:"command"`
	// Args override the image's cmd.
	Args []string `json:"args"`
	// WorkingDir of the process.
	WorkingDir string `json:"workingDir"`
	// Ports the container exposes.
	Ports []ContainerPort `json:"ports"`
	// Env variables set directly (valueFrom sources are not decoded).
	Env []EnvVar `json:"env"`
	// Resources requested and limited.
	Resources ResourceRequirements `json:"resources"`
	// VolumeMounts of the container.
	VolumeMounts []VolumeMount `json:"volumeMounts"`
	// ImagePullPolicy is Always, IfNotPresent or Never.
	ImagePullPolicy string `json:"imagePullPolicy"`
	// SecurityContext holds container-level security settings.
	SecurityContext *SecurityContext `json:"securityContext"`
}

// ContainerPort is a v1.ContainerPort.
type ContainerPort struct {
	// Name of the port.
	Name string `json:"name"`
	// HostPort exposes the port on the node.
	HostPort int32 `json:"hostPort"`
	// ContainerPort is the port in the container.
	ContainerPort int32 `json:"containerPort"`
	// Protocol is TCP, UDP or SCTP.
	Protocol string `json:"protocol"`
	// HostIP binds the host port.
	HostIP string `json:"hostIP"`
}

// ResourceList maps a resource name ("cpu", "memory") to a quantity as
// written ("250m", "1Gi"; a JSON number keeps its literal text).
type ResourceList map[string]string

// ResourceRequirements is a v1.ResourceRequirements.
type ResourceRequirements struct {
	// Limits are the maximum amounts.
	Limits ResourceList `json:"limits"`
	// Requests are the guaranteed amounts.
	Requests ResourceList `json:"requests"`
}

// VolumeMount is a v1.VolumeMount, reduced.
type VolumeMount struct {
	// Name of the volume.
	Name string `json:"name"`
	// ReadOnly mounts the volume read-only.
	ReadOnly bool `json:"readOnly"`
	// MountPath in the container.
	MountPath string `json:"mountPath"`
	// SubPath within the volume.
	SubPath string `json:"subPath"`
}

// SecurityContext is a v1.SecurityContext, reduced.
type SecurityContext struct {
	// Capabilities added and dropped.
	Capabilities *Capabilities `json:"capabilities"`
	// Privileged runs the container privileged.
	Privileged *bool `json:"privileged"`
	// RunAsUser is the UID of the process.
	RunAsUser *int64 `json:"runAsUser"`
	// RunAsGroup is the GID of the process.
	RunAsGroup *int64 `json:"runAsGroup"`
	// RunAsNonRoot requires a non-zero UID.
	RunAsNonRoot *bool `json:"runAsNonRoot"`
	// ReadOnlyRootFilesystem mounts the root filesystem read-only.
	ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem"`
	// AllowPrivilegeEscalation controls no_new_privs.
	AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
	// SeccompProfile of the container.
	SeccompProfile *SeccompProfile `json:"seccompProfile"`
}

// Capabilities is a v1.Capabilities.
type Capabilities struct {
	// Add lists capabilities to add.
	Add []string `json:"add"`
	// Drop lists capabilities to drop.
	Drop []string `json:"drop"`
}

// SeccompProfile is a v1.SeccompProfile.
type SeccompProfile struct {
	// Type is RuntimeDefault, Unconfined or Localhost.
	Type string `json:"type"`
	// LocalhostProfile is the profile's path for type Localhost.
	LocalhostProfile *string `json:"localhostProfile"`
}

// PodSecurityContext is a v1.PodSecurityContext, reduced.
type PodSecurityContext struct {
	// RunAsUser is the default UID of the pod's processes.
	RunAsUser *int64 `json:"runAsUser"`
	// RunAsGroup is the default GID.
	RunAsGroup *int64 `json:"runAsGroup"`
	// RunAsNonRoot requires non-zero UIDs.
	RunAsNonRoot *bool `json:"runAsNonRoot"`
	// SupplementalGroups are added to every process.
	SupplementalGroups []int64 `json:"supplementalGroups"`
	// FSGroup owns the pod's volumes.
	FSGroup *int64 `json:"fsGroup"`
	// Sysctls set in the pod's namespaces.
	Sysctls []Sysctl `json:"sysctls"`
	// SeccompProfile is the pod's default profile.
	SeccompProfile *SeccompProfile `json:"seccompProfile"`
}

// Sysctl is a v1.Sysctl.
type Sysctl struct {
	// Name of the sysctl.
	Name string `json:"name"`
	// Value of the sysctl.
	Value string `json:"value"`
}

// Toleration is a v1.Toleration.
type Toleration struct {
	// Key is the taint key.
	Key string `json:"key"`
	// Operator is Exists or Equal.
	Operator string `json:"operator"`
	// Value is the taint value.
	Value string `json:"value"`
	// Effect is the taint effect.
	Effect string `json:"effect"`
	// TolerationSeconds bounds a NoExecute toleration.
	TolerationSeconds *int64 `json:"tolerationSeconds"`
}

// Volume is a v1.Volume with only its hostPath source decoded.
type Volume struct {
	// Name of the volume.
	Name string `json:"name"`
	// HostPath is set for a hostPath volume.
	HostPath *HostPathVolumeSource `json:"hostPath"`
}

// HostPathVolumeSource is a v1.HostPathVolumeSource.
type HostPathVolumeSource struct {
	// Path on the node.
	Path string `json:"path"`
	// Type of the path check.
	Type *string `json:"type"`
}

// PodStatus is a v1.PodStatus, reduced to the phase.
type PodStatus struct {
	// Phase is Pending, Running, Succeeded, Failed or Unknown.
	Phase string `json:"phase"`
}

// Node is a v1.Node, reduced.
type Node struct {
	// ObjectMeta is the node's metadata.
	ObjectMeta `json:"metadata"`
	// Spec is the node's spec.
	Spec NodeSpec `json:"spec"`
	// Status is the node's status (capacity and allocatable).
	Status NodeStatus `json:"status"`
}

// NodeSpec is a v1.NodeSpec, reduced.
type NodeSpec struct {
	// Unschedulable marks a cordoned node.
	Unschedulable bool `json:"unschedulable"`
	// Taints of the node.
	Taints []Taint `json:"taints"`
}

// Taint is a v1.Taint, reduced.
type Taint struct {
	// Key of the taint.
	Key string `json:"key"`
	// Value of the taint.
	Value string `json:"value"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect string `json:"effect"`
}

// NodeStatus is a v1.NodeStatus, reduced.
type NodeStatus struct {
	// Capacity of the node.
	Capacity ResourceList `json:"capacity"`
	// Allocatable resources of the node.
	Allocatable ResourceList `json:"allocatable"`
}

// IsPrivileged reports whether the security context asks for a privileged
// container. It is nil-safe.
func (s *SecurityContext) IsPrivileged() bool {
	return s != nil && s.Privileged != nil && *s.Privileged
}

// AllContainers returns the init, app and ephemeral containers, in that order.
func (s *PodSpec) AllContainers() []*Container {
	all := make([]*Container, 0, len(s.InitContainers)+len(s.Containers)+len(s.EphemeralContainers))
	for _, list := range [][]Container{s.InitContainers, s.Containers, s.EphemeralContainers} {
		for i := range list {
			all = append(all, &list[i])
		}
	}
	return all
}

// DecodePod decodes a v1.Pod's JSON without reflection. Unknown fields are
// skipped; malformed JSON or a field of the wrong type is an error.
func DecodePod(data []byte) (Pod, error) {
	var p Pod
	d := newDecoder(clone(data))
	decodePod(d, &p)
	return p, d.end()
}

// DecodeNode decodes a v1.Node's JSON without reflection.
func DecodeNode(data []byte) (Node, error) {
	var n Node
	d := newDecoder(clone(data))
	decodeNode(d, &n)
	return n, d.end()
}

// clone copies a caller's buffer once so decoded strings can alias it.
func clone(b []byte) []byte { return append([]byte(nil), b...) }

func decodePod(d *decoder, p *Pod) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "metadata":
			decodeMeta(d, &p.ObjectMeta)
		case "spec":
			decodeSpec(d, &p.Spec)
		case "status":
			for n := 0; d.field(&n); {
				if string(d.key) == "phase" {
					d.setStr(&p.Status.Phase)
				} else {
					d.skip()
				}
			}
		default:
			d.skip()
		}
	}
}

func decodeMeta(d *decoder, m *ObjectMeta) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&m.Name)
		case "generateName":
			d.setStr(&m.GenerateName)
		case "namespace":
			d.setStr(&m.Namespace)
		case "uid":
			d.setStr(&m.UID)
		case "labels":
			if d.parts&Labels == 0 {
				d.skip()
				continue
			}
			d.setStringMap(&m.Labels, false)
		case "annotations":
			if d.parts&Labels == 0 {
				d.skip()
				continue
			}
			d.setStringMap(&m.Annotations, false)
		case "ownerReferences":
			if d.parts&Labels == 0 {
				d.skip()
				continue
			}
			decodeArray(d, &m.OwnerReferences, &d.ownerRefs, 4, decodeOwnerRef)
		default:
			d.skip()
		}
	}
}

func decodeOwnerRef(d *decoder, o *OwnerReference) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "apiVersion":
			d.setStr(&o.APIVersion)
		case "kind":
			d.setStr(&o.Kind)
		case "name":
			d.setStr(&o.Name)
		case "uid":
			d.setStr(&o.UID)
		case "controller":
			setPtr(d, &o.Controller, &d.bools, (*decoder).setBool)
		default:
			d.skip()
		}
	}
}

func decodeSpec(d *decoder, s *PodSpec) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "volumes":
			if d.parts&Volumes == 0 {
				d.skip()
				continue
			}
			decodeArray(d, &s.Volumes, &d.volumes, 8, decodeVolume)
		case "initContainers":
			decodeContainers(d, &s.InitContainers)
		case "containers":
			decodeContainers(d, &s.Containers)
		case "ephemeralContainers":
			decodeContainers(d, &s.EphemeralContainers)
		case "restartPolicy":
			d.setStr(&s.RestartPolicy)
		case "nodeSelector":
			if d.parts&Scheduling == 0 {
				d.skip()
				continue
			}
			d.setStringMap(&s.NodeSelector, false)
		case "serviceAccountName":
			d.setStr(&s.ServiceAccountName)
		case "nodeName":
			d.setStr(&s.NodeName)
		case "hostNetwork":
			d.setBool(&s.HostNetwork)
		case "hostPID":
			d.setBool(&s.HostPID)
		case "hostIPC":
			d.setBool(&s.HostIPC)
		case "securityContext":
			if d.null() {
				s.SecurityContext = nil
				continue
			}
			if s.SecurityContext == nil {
				s.SecurityContext = arenaNew(&d.podSecs)
			}
			decodePodSecurity(d, s.SecurityContext)
		case "tolerations":
			if d.parts&Scheduling == 0 {
				d.skip()
				continue
			}
			decodeArray(d, &s.Tolerations, &d.tolerations, 8, decodeToleration)
		case "priorityClassName":
			d.setStr(&s.PriorityClassName)
		case "priority":
			setPtr(d, &s.Priority, &d.int32s, (*decoder).setInt32)
		case "runtimeClassName":
			setPtr(d, &s.RuntimeClassName, &d.strps, (*decoder).setStr)
		default:
			d.skip()
		}
	}
}

func decodeVolume(d *decoder, v *Volume) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&v.Name)
		case "hostPath":
			if d.null() {
				v.HostPath = nil
				continue
			}
			if v.HostPath == nil {
				v.HostPath = arenaNew(&d.hostPaths)
			}
			for n := 0; d.field(&n); {
				switch string(d.key) {
				case "path":
					d.setStr(&v.HostPath.Path)
				case "type":
					setPtr(d, &v.HostPath.Type, &d.strps, (*decoder).setStr)
				default:
					d.skip()
				}
			}
		default:
			d.skip()
		}
	}
}

func decodeToleration(d *decoder, t *Toleration) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "key":
			d.setStr(&t.Key)
		case "operator":
			d.setStr(&t.Operator)
		case "value":
			d.setStr(&t.Value)
		case "effect":
			d.setStr(&t.Effect)
		case "tolerationSeconds":
			setPtr(d, &t.TolerationSeconds, &d.ints, (*decoder).setInt64)
		default:
			d.skip()
		}
	}
}

func decodeContainers(d *decoder, p *[]Container) {
	decodeArray(d, p, &d.containers, 4, decodeContainer)
}

func decodeContainer(d *decoder, c *Container) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&c.Name)
		case "image":
			d.setStr(&c.Image)
		case "command":
			if d.parts&Commands == 0 {
				d.skip()
				continue
			}
			d.setStrings(&c.Command)
		case "args":
			if d.parts&Commands == 0 {
				d.skip()
				continue
			}
			d.setStrings(&c.Args)
		case "workingDir":
			if d.parts&Commands == 0 {
				d.skip()
				continue
			}
			d.setStr(&c.WorkingDir)
		case "ports":
			if d.parts&Ports == 0 {
				d.skip()
				continue
			}
			decodeArray(d, &c.Ports, &d.ports, 8, decodePort)
		case "env":
			if d.parts&Env == 0 {
				d.skip()
				continue
			}
			decodeArray(d, &c.Env, &d.envs, 16, decodeEnv)
		case "resources":
			if d.parts&Resources == 0 {
				d.skip()
				continue
			}
			for n := 0; d.field(&n); {
				switch string(d.key) {
				case "limits":
					d.setStringMap((*map[string]string)(&c.Resources.Limits), true)
				case "requests":
					d.setStringMap((*map[string]string)(&c.Resources.Requests), true)
				default:
					d.skip()
				}
			}
		case "volumeMounts":
			if d.parts&VolumeMounts == 0 {
				d.skip()
				continue
			}
			decodeArray(d, &c.VolumeMounts, &d.mounts, 16, decodeMount)
		case "imagePullPolicy":
			d.setStr(&c.ImagePullPolicy)
		case "securityContext":
			if d.null() {
				c.SecurityContext = nil
				continue
			}
			if c.SecurityContext == nil {
				c.SecurityContext = arenaNew(&d.secctxs)
			}
			decodeSecurity(d, c.SecurityContext)
		default:
			d.skip()
		}
	}
}

func decodeEnv(d *decoder, e *EnvVar) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&e.Name)
		case "value":
			d.setStr(&e.Value)
		default:
			d.skip()
		}
	}
}

func decodePort(d *decoder, p *ContainerPort) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&p.Name)
		case "hostPort":
			d.setInt32(&p.HostPort)
		case "containerPort":
			d.setInt32(&p.ContainerPort)
		case "protocol":
			d.setStr(&p.Protocol)
		case "hostIP":
			d.setStr(&p.HostIP)
		default:
			d.skip()
		}
	}
}

func decodeMount(d *decoder, m *VolumeMount) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "name":
			d.setStr(&m.Name)
		case "readOnly":
			d.setBool(&m.ReadOnly)
		case "mountPath":
			d.setStr(&m.MountPath)
		case "subPath":
			d.setStr(&m.SubPath)
		default:
			d.skip()
		}
	}
}

func decodeSecurity(d *decoder, s *SecurityContext) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "capabilities":
			if d.null() {
				s.Capabilities = nil
				continue
			}
			if s.Capabilities == nil {
				s.Capabilities = arenaNew(&d.caps)
			}
			for n := 0; d.field(&n); {
				switch string(d.key) {
				case "add":
					d.setStrings(&s.Capabilities.Add)
				case "drop":
					d.setStrings(&s.Capabilities.Drop)
				default:
					d.skip()
				}
			}
		case "privileged":
			setPtr(d, &s.Privileged, &d.bools, (*decoder).setBool)
		case "runAsUser":
			setPtr(d, &s.RunAsUser, &d.ints, (*decoder).setInt64)
		case "runAsGroup":
			setPtr(d, &s.RunAsGroup, &d.ints, (*decoder).setInt64)
		case "runAsNonRoot":
			setPtr(d, &s.RunAsNonRoot, &d.bools, (*decoder).setBool)
		case "readOnlyRootFilesystem":
			setPtr(d, &s.ReadOnlyRootFilesystem, &d.bools, (*decoder).setBool)
		case "allowPrivilegeEscalation":
			setPtr(d, &s.AllowPrivilegeEscalation, &d.bools, (*decoder).setBool)
		case "seccompProfile":
			decodeSeccomp(d, &s.SeccompProfile)
		default:
			d.skip()
		}
	}
}

func decodeSeccomp(d *decoder, p **SeccompProfile) {
	if d.null() {
		*p = nil
		return
	}
	if *p == nil {
		*p = arenaNew(&d.seccomps)
	}
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "type":
			d.setStr(&(*p).Type)
		case "localhostProfile":
			setPtr(d, &(*p).LocalhostProfile, &d.strps, (*decoder).setStr)
		default:
			d.skip()
		}
	}
}

func decodePodSecurity(d *decoder, s *PodSecurityContext) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "runAsUser":
			setPtr(d, &s.RunAsUser, &d.ints, (*decoder).setInt64)
		case "runAsGroup":
			setPtr(d, &s.RunAsGroup, &d.ints, (*decoder).setInt64)
		case "runAsNonRoot":
			setPtr(d, &s.RunAsNonRoot, &d.bools, (*decoder).setBool)
		case "supplementalGroups":
			d.setInt64s(&s.SupplementalGroups)
		case "fsGroup":
			setPtr(d, &s.FSGroup, &d.ints, (*decoder).setInt64)
		case "sysctls":
			v, isNull := s.Sysctls[:0], false
			for n := 0; d.elem(&n, &isNull); {
				decodeEnv(d, (*EnvVar)(grow(&v))) // the same shape: name, value
			}
			s.Sysctls = finishSlice(v, isNull, d.err)
		case "seccompProfile":
			decodeSeccomp(d, &s.SeccompProfile)
		default:
			d.skip()
		}
	}
}

func decodeNode(d *decoder, nd *Node) {
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "metadata":
			decodeMeta(d, &nd.ObjectMeta)
		case "spec":
			for n := 0; d.field(&n); {
				switch string(d.key) {
				case "unschedulable":
					d.setBool(&nd.Spec.Unschedulable)
				case "taints":
					s, isNull := nd.Spec.Taints[:0], false
					for n := 0; d.elem(&n, &isNull); {
						t := grow(&s)
						for n := 0; d.field(&n); {
							switch string(d.key) {
							case "key":
								d.setStr(&t.Key)
							case "value":
								d.setStr(&t.Value)
							case "effect":
								d.setStr(&t.Effect)
							default:
								d.skip()
							}
						}
					}
					nd.Spec.Taints = finishSlice(s, isNull, d.err)
				default:
					d.skip()
				}
			}
		case "status":
			for n := 0; d.field(&n); {
				switch string(d.key) {
				case "capacity":
					d.setStringMap((*map[string]string)(&nd.Status.Capacity), true)
				case "allocatable":
					d.setStringMap((*map[string]string)(&nd.Status.Allocatable), true)
				default:
					d.skip()
				}
			}
		default:
			d.skip()
		}
	}
}
