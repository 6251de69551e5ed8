package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// effectiveSecurityContext is the container's security context with the
// pod's filled in where the container sets nothing, as the kubelet's
// DetermineEffectiveSecurityContext.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	sc := &v1.SecurityContext{}
	if c.SecurityContext != nil {
		sc = c.SecurityContext.DeepCopy()
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return sc
	}
	if sc.RunAsUser == nil {
		sc.RunAsUser = psc.RunAsUser
	}
	if sc.RunAsGroup == nil {
		sc.RunAsGroup = psc.RunAsGroup
	}
	if sc.RunAsNonRoot == nil {
		sc.RunAsNonRoot = psc.RunAsNonRoot
	}
	if sc.SELinuxOptions == nil {
		sc.SELinuxOptions = psc.SELinuxOptions
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = psc.SeccompProfile
	}
	if sc.AppArmorProfile == nil {
		sc.AppArmorProfile = psc.AppArmorProfile
	}
	return sc
}

// The kubelet's masked and read-only /proc and /sys paths of a container
// with the default procMount.
var (
	defaultMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap"}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// maskedPaths adds the CPUs' thermal_throttle directories, as the kubelet
// does where they exist.
func maskedPaths() []string {
	out := append([]string(nil), defaultMaskedPaths...)
	if dirs, err := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle"); err == nil {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// securityContext is the container's CRI security context, as the
// kubelet's convertToRuntimeSecurityContext and its additions make it.
func securityContext(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	esc := effectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		RunAsUser:        int64Value(esc.RunAsUser),
		RunAsGroup:       int64Value(esc.RunAsGroup),
		SelinuxOptions:   selinuxOptions(esc.SELinuxOptions),
		Seccomp:          seccompProfile(esc.SeccompProfile),
		Apparmor:         apparmorProfile(esc.AppArmorProfile),
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.SupplementalGroups = supplementalGroups(psc)
	}
	if esc.Privileged != nil {
		sc.Privileged = *esc.Privileged
	}
	if esc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *esc.ReadOnlyRootFilesystem
	}
	if caps := esc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, c := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(c))
		}
		for _, c := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(c))
		}
	}
	// allowPrivilegeEscalation: false sets no_new_privs.
	if esc.AllowPrivilegeEscalation != nil && !*esc.AllowPrivilegeEscalation {
		sc.NoNewPrivs = true
	}
	// Sent for privileged containers too, as the kubelet sends them (the
	// runtime does not apply them to a privileged container).
	if esc.ProcMount != nil && *esc.ProcMount == v1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	} else {
		sc.MaskedPaths, sc.ReadonlyPaths = maskedPaths(), defaultReadonlyPaths
	}
	return sc
}

func selinuxOptions(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// seccompProfile maps a seccomp profile to CRI; unset is Unconfined, the
// kubelet's default without SeccompDefault.
func seccompProfile(p *v1.SeccompProfile) *runtimeapi.SecurityProfile {
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case v1.SeccompProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = filepath.Join("/var/lib/kubelet/seccomp", *p.LocalhostProfile)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// apparmorProfile maps an AppArmor profile to CRI; unset leaves the
// runtime's default.
func apparmorProfile(p *v1.AppArmorProfile) *runtimeapi.SecurityProfile {
	if p == nil {
		return nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	case v1.AppArmorProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = *p.LocalhostProfile
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
}

// verifyRunAsNonRoot refuses a container that must not run as root but
// would, as the kubelet does: its runAsUser is 0, or it sets none and the
// image's user is root or a name that cannot be checked. uid and username
// are the image's user.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, uid *int64, username string) error {
	esc := effectiveSecurityContext(pod, c)
	if esc.RunAsNonRoot == nil || !*esc.RunAsNonRoot {
		return nil
	}
	who := fmt.Sprintf("(pod: %q, container: %s)", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", c.Name)
	if esc.RunAsUser != nil {
		if *esc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy %s", who)
		}
		return nil
	}
	switch {
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", username, who)
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root %s", who)
	}
	return nil
}

// checkNonRoot applies verifyRunAsNonRoot with the image's user, read
// from the runtime only when the pod asks for non-root and sets no user.
func (m *Manager) checkNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	esc := effectiveSecurityContext(pod, c)
	if esc.RunAsNonRoot == nil || !*esc.RunAsNonRoot || esc.RunAsUser != nil {
		return verifyRunAsNonRoot(pod, c, nil, "")
	}
	st, err := m.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
	if err != nil {
		return fmt.Errorf("image status of %q: %w", c.Image, err)
	}
	// The kubelet's getImageUser: the image's uid, else its user name,
	// else (neither set) root.
	uid, name := new(int64), ""
	if u := st.GetImage().GetUid(); u != nil {
		v := u.Value
		uid = &v
	} else if n := st.GetImage().GetUsername(); n != "" {
		uid, name = nil, n
	}
	return verifyRunAsNonRoot(pod, c, uid, name)
}
