package pluginfetch

import (
	"fmt"
	"strings"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// Defaults are the host's values for permissions a manifest leaves unset:
// what an unset request or an unset grant means.
type Defaults struct {
	// MemoryPages is the host's memory cap in 64 KiB pages.
	MemoryPages uint32
	// Timeout is the host's per-call deadline.
	Timeout time.Duration
}

// effective merges the artifact's manifest art with the node's reference
// manifest ref: the artifact's abi, kinds, version, sha256 and requested
// permissions; the node's name, config, failure policy, order and mode. A
// request beyond ref's permissions (the grant) is refused, naming the
// field. An unset request runs at the grant.
func effective(ref, art abi.Manifest, d Defaults) (abi.Manifest, error) {
	if art.Reference() {
		return abi.Manifest{}, fmt.Errorf("the artifact's manifest names image %s itself", art.Image)
	}
	eff := art
	eff.Name, eff.Config, eff.FailurePolicy, eff.Order, eff.Mode = ref.Name, ref.Config, ref.FailurePolicy, ref.Order, ref.Mode
	eff.Wasm, eff.Image, eff.Verification = "", "", nil
	grant, ask := ref.Permissions, art.Permissions
	for _, h := range ask.AllowedHosts {
		if !granted(grant.AllowedHosts, h) {
			return abi.Manifest{}, fmt.Errorf("permissions.allowedHosts: the artifact asks for %q, which the grant %v does not cover", h, grant.AllowedHosts)
		}
	}
	for _, f := range ask.Adjust {
		if !grant.MayAdjust(f) {
			return abi.Manifest{}, fmt.Errorf("permissions.adjust: the artifact asks for %q, which the grant %v does not cover", f, grantedAdjust(grant))
		}
	}
	for _, hp := range ask.HostPaths {
		if !grant.HostPathAllowed(hp) {
			return abi.Manifest{}, fmt.Errorf("permissions.hostPaths: the artifact asks for %q, which the grant %v does not cover", hp, grant.HostPaths)
		}
	}
	// An unset grant is the host's default; an unset request runs at the
	// grant.
	pages := func(v uint32) uint32 {
		if v == 0 {
			return d.MemoryPages
		}
		return v
	}
	if ask.MemoryPages != 0 && ask.MemoryPages > pages(grant.MemoryPages) {
		return abi.Manifest{}, fmt.Errorf("permissions.memoryPages: the artifact asks for %d pages, the grant is %d", ask.MemoryPages, pages(grant.MemoryPages))
	}
	if ask.MemoryPages == 0 {
		eff.Permissions.MemoryPages = grant.MemoryPages
	}
	timeout := func(v time.Duration) time.Duration {
		if v == 0 {
			return d.Timeout
		}
		return v
	}
	if ask.Timeout.Duration != 0 && ask.Timeout.Duration > timeout(grant.Timeout.Duration) {
		return abi.Manifest{}, fmt.Errorf("permissions.timeout: the artifact asks for %s, the grant is %s", ask.Timeout.Duration, timeout(grant.Timeout.Duration))
	}
	if ask.Timeout.Duration == 0 {
		eff.Permissions.Timeout = grant.Timeout
	}
	if err := eff.Validate(); err != nil {
		return abi.Manifest{}, err
	}
	return eff, nil
}

// grantedAdjust is what grant lets a hook adjust: its adjust list, or the
// default when it has none.
func grantedAdjust(grant abi.Permissions) []abi.AdjustField {
	if len(grant.Adjust) == 0 {
		return abi.DefaultAdjust
	}
	return grant.Adjust
}

// granted reports whether the grant covers host h: an equal entry, or a
// "*.domain" entry of which h (a name or itself a wildcard) is a
// subdomain.
func granted(grant []string, h string) bool {
	for _, g := range grant {
		if g == h || (strings.HasPrefix(g, "*.") && strings.HasSuffix(h, g[1:]) && len(h) > len(g)-1) {
			return true
		}
	}
	return false
}
