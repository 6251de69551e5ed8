package admission

import (
	"bytes"
	"context"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// AppArmorName is the name of the AppArmor admitter.
const AppArmorName = "AppArmor"

// AppArmor rejects, as the kubelet's AppArmor admit handler does (reason
// "AppArmor"), a pod that asks for an AppArmor profile (any but
// unconfined, in a container's or the pod's securityContext or the beta
// annotation) on a host without AppArmor, and a pod naming an empty
// localhost profile. hostEnabled tells whether the host enforces AppArmor;
// it is asked once, here, as the kubelet checks its host once at start.
func AppArmor(hostEnabled func() bool) Admitter {
	return appArmor{enabled: hostEnabled()}
}

// HostAppArmor reports whether this host enforces AppArmor: its security
// file system is mounted and the module is enabled.
func HostAppArmor() bool {
	if _, err := os.Stat("/sys/kernel/security/apparmor"); err != nil {
		return false
	}
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && bytes.HasPrefix(b, []byte("Y"))
}

type appArmor struct{ enabled bool }

func (appArmor) Name() string { return AppArmorName }

func (a appArmor) Admit(_ context.Context, attrs Attributes) (Result, error) {
	for _, p := range appArmorProfiles(attrs.Pod) {
		if p.Type == v1.AppArmorProfileTypeUnconfined {
			continue
		}
		if !a.enabled {
			return Result{Reason: "AppArmor", Message: "Cannot enforce AppArmor: AppArmor is not enabled on the host"}, nil
		}
		if p.Type == v1.AppArmorProfileTypeLocalhost && (p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "") {
			return Result{Reason: "AppArmor", Message: "Cannot enforce AppArmor: invalid empty AppArmor localhost profile name"}, nil
		}
	}
	return Result{Admit: true}, nil
}

// appArmorProfiles are the profiles the pod's containers ask for: each
// container's securityContext, else its beta annotation, else the pod's.
func appArmorProfiles(pod *v1.Pod) []v1.AppArmorProfile {
	var out []v1.AppArmorProfile
	visit := func(name string, sc *v1.SecurityContext) {
		switch {
		case sc != nil && sc.AppArmorProfile != nil:
			out = append(out, *sc.AppArmorProfile)
		case pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+name] != "":
			out = append(out, betaAppArmorProfile(pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+name]))
		case pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.AppArmorProfile != nil:
			out = append(out, *pod.Spec.SecurityContext.AppArmorProfile)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.Name, c.SecurityContext)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.Name, c.SecurityContext)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.Name, c.SecurityContext)
	}
	return out
}

// betaAppArmorProfile reads the beta annotation's value: runtime/default,
// unconfined or localhost/<name>.
func betaAppArmorProfile(v string) v1.AppArmorProfile {
	switch {
	case v == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
	case strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix)
		return v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	return v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
}
