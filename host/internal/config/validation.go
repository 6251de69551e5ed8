package config

import (
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateStatic checks a static pod (after ApplyStaticDefaults) against the
// API server's rules for a pod on create, the way the kubelet validates the
// pods of its file and URL sources: object metadata (name, namespace, labels,
// annotations and their 256 KiB total size), container, volume and port
// names, images, environment variable names, resource names and quantities
// (requests within limits), volume mounts, probes, and the spec's enums. A
// pod the API server would refuse never reaches the runtime, so no static
// pod can carry what no API pod can (such as megabytes of annotations that
// would swell every sandbox listing). The error lists every bad field by its
// path, e.g. "metadata.annotations: Too long: may not be more than 262144
// bytes".
func ValidateStatic(pod *v1.Pod) error {
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"))...)
	return errs.ToAggregate()
}

var (
	restartPolicies = sets.New(v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever)
	dnsPolicies     = sets.New(v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone)
	protocols       = sets.New(v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)
	pullPolicies    = sets.New(v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)
	messagePolicies = sets.New(v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError)
)

func validateSpec(s *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		vp := p.Child("volumes").Index(i)
		errs = append(errs, dnsLabel(v.Name, vp.Child("name"))...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if n := countSources(&v.VolumeSource); n != 1 {
			errs = append(errs, field.Invalid(vp, v.Name, "must specify exactly one volume type"))
		}
	}
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	names := sets.New[string]()
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], p.Child("initContainers").Index(i), names, volumes)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], p.Child("containers").Index(i), names, volumes)...)
	}
	if !restartPolicies.Has(s.RestartPolicy) {
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), s.RestartPolicy, sets.List(restartPolicies)))
	}
	if !dnsPolicies.Has(s.DNSPolicy) {
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), s.DNSPolicy, sets.List(dnsPolicies)))
	}
	if s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *s.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	if s.Hostname != "" {
		errs = append(errs, dnsLabel(s.Hostname, p.Child("hostname"))...)
	}
	if s.Subdomain != "" {
		errs = append(errs, dnsLabel(s.Subdomain, p.Child("subdomain"))...)
	}
	if s.ServiceAccountName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(s.ServiceAccountName, false) {
			errs = append(errs, field.Invalid(p.Child("serviceAccountName"), s.ServiceAccountName, msg))
		}
	}
	return errs
}

func validateContainer(c *v1.Container, p *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, dnsLabel(c.Name, p.Child("name"))...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if c.ImagePullPolicy != "" && !pullPolicies.Has(c.ImagePullPolicy) {
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
	}
	if c.TerminationMessagePolicy != "" && !messagePolicies.Has(c.TerminationMessagePolicy) {
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, sets.List(messagePolicies)))
	}
	ports := sets.New[string]()
	for i, port := range c.Ports {
		pp := p.Child("ports").Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if ports.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			ports.Insert(port.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if !protocols.Has(port.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(protocols)))
		}
	}
	for i, e := range c.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(p.Child("env").Index(i).Child("name"), e.Name, msg))
		}
	}
	errs = append(errs, validateResources(&c.Resources, p.Child("resources"))...)
	paths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
	}
	for _, pr := range []struct {
		name  string
		probe *v1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		if pr.probe != nil {
			errs = append(errs, validateProbe(pr.probe, p.Child(pr.name))...)
		}
	}
	return errs
}

func validateResources(r *v1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		l    v1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for n, q := range list.l {
			fp := p.Child(list.name).Key(string(n))
			errs = append(errs, resourceName(n, fp)...)
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(fp, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for n, req := range r.Requests {
		if lim, ok := r.Limits[n]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(n)), req.String(), "must be less than or equal to "+string(n)+" limit of "+lim.String()))
		}
	}
	return errs
}

// resourceName accepts the standard resource names and the qualified names
// of extended resources (a domain prefix outside kubernetes.io).
func resourceName(n v1.ResourceName, p *field.Path) field.ErrorList {
	switch n {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return nil
	}
	if strings.HasPrefix(string(n), v1.ResourceHugePagesPrefix) {
		if _, err := resource.ParseQuantity(strings.TrimPrefix(string(n), v1.ResourceHugePagesPrefix)); err != nil {
			return field.ErrorList{field.Invalid(p, n, "must be hugepages-<size>")}
		}
		return nil
	}
	if !strings.Contains(string(n), "/") {
		return field.ErrorList{field.Invalid(p, n, "must be a standard resource name or fully qualified (domain/name)")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(n)) {
		errs = append(errs, field.Invalid(p, n, msg))
	}
	return errs
}

func validateProbe(pr *v1.Probe, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds}, {"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(f.v), p.Child(f.name))...)
	}
	n := 0
	for _, set := range []bool{pr.Exec != nil, pr.HTTPGet != nil, pr.TCPSocket != nil, pr.GRPC != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(p, "", "must specify exactly one handler (exec, httpGet, tcpSocket or grpc)"))
	}
	return errs
}

func dnsLabel(v string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// countSources counts the set (non-nil) fields of a volume source.
func countSources(vs *v1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(vs).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}
