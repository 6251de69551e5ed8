package abi

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FailurePolicy says what the host does when a plugin call fails (trap,
// timeout, garbage, or an Error in the response).
type FailurePolicy string

const (
	// FailurePolicyFail treats a failed call as a denial (admission) or a
	// failed step (hook), with a reason that says the plugin failed.
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore logs and counts the failure and carries on as if the
	// plugin had not been called.
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// Mode says whether an admission plugin's denials block pods.
type Mode string

const (
	// ModeEnforce applies the plugin's verdicts: a denial rejects the pod,
	// a failed call follows the failure policy. The default.
	ModeEnforce Mode = "enforce"
	// ModeMonitor calls the plugin like any other but admits every pod: a
	// denial is reported (log, event on the pod, metric) instead of
	// applied, and a failed call never blocks whatever the failure policy.
	// Only a plugin whose kinds are [admission] may monitor.
	ModeMonitor Mode = "monitor"
)

// ManifestSuffix is the file name suffix of a plugin manifest; the manifest
// of plugin "x" is usually "x.plugin.yaml" beside "x.wasm".
const ManifestSuffix = ".plugin.yaml"

// Manifest describes one plugin. It is written in YAML beside the .wasm file
// (the host converts YAML to JSON, hence the json tags).
type Manifest struct {
	// Name is unique within a plugin directory: lowercase letters, digits
	// and dashes.
	Name string `json:"name"`
	// Version is the plugin's own version (semver recommended).
	Version string `json:"version"`
	// ABI is the ABI the module was built against: "v1" or "extism".
	ABI Version `json:"abi"`
	// Kinds the module implements; each needs its export.
	Kinds []Kind `json:"kinds"`
	// Points are the lifecycle points a hook plugin is called at; empty
	// means DefaultHookPoints. Validate, PreUpdate and PostStop are called
	// only for a plugin that lists them. An addition: an older host refuses
	// a manifest that sets it rather than never calling the plugin there.
	Points []HookPoint `json:"points,omitempty"`
	// Wasm is the module's file name relative to the manifest; default
	// "<name>.wasm".
	Wasm string `json:"wasm,omitempty"`
	// SHA256 is the hex sha256 of the .wasm file; loading fails on mismatch.
	SHA256 string `json:"sha256"`
	// Config is handed to the plugin through the config_get import.
	Config map[string]string `json:"config,omitempty"`
	// Permissions bound what the plugin may do.
	Permissions Permissions `json:"permissions,omitempty"`
	// FailurePolicy applies when a call fails; default Fail.
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// Order sorts plugins of one kind (lower first; ties by name).
	Order int `json:"order,omitempty"`
	// Mode is enforce (the default) or monitor (admission only): a
	// monitoring plugin's denials and failures admit the pod and are
	// reported. It applies to the whole module, every policy of a bundle.
	Mode Mode `json:"mode,omitempty"`
	// Image names the plugin in an OCI registry (REGISTRY/REPO:TAG or
	// REGISTRY/REPO@sha256:…) instead of a .wasm beside the manifest: the
	// host pulls it, verifies it against Verification (and the node's
	// policy), caches it by digest and loads the module and manifest the
	// artifact carries.
	Image string `json:"image,omitempty"`
	// Verification lists the signatures a plugin pulled from a registry
	// must carry. Empty means none beyond what the node's policy asks.
	Verification *Verification `json:"verification,omitempty"`
}

// Verification says whose signature a plugin artifact must carry: it is
// accepted when one of its cosign signatures verifies against one of Keys
// or one of Keyless.
type Verification struct {
	// Keys are cosign public keys: PEM files (relative to the manifest) or
	// inline PEM text.
	Keys []string `json:"keys,omitempty"`
	// Keyless are the Fulcio certificate identities accepted for a keyless
	// signature, checked against TrustedRoot.
	Keyless []KeylessIdentity `json:"keyless,omitempty"`
	// TrustedRoot is a Sigstore trusted_root.json (Fulcio CAs, Rekor keys)
	// for keyless signatures, relative to the manifest; it is read
	// offline.
	TrustedRoot string `json:"trustedRoot,omitempty"`
}

// KeylessIdentity is a signer's identity in a Fulcio certificate.
type KeylessIdentity struct {
	// Issuer is the OIDC issuer that vouched for the signer, exactly.
	Issuer string `json:"issuer"`
	// Subject is the certificate's subject (an e-mail or URI), exactly.
	Subject string `json:"subject,omitempty"`
	// SubjectRegExp matches the subject when Subject is empty.
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

// Permissions is the sandbox a plugin runs in.
type Permissions struct {
	// AllowedHosts are the host[:port] values the http_request import may
	// reach; "*.example.com" matches subdomains. Empty means no network.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// MemoryPages caps the module's linear memory in 64 KiB pages; 0 means
	// the host default.
	MemoryPages uint32 `json:"memoryPages,omitempty"`
	// Timeout is the per-call deadline as a Go duration ("100ms"); empty
	// means the host default.
	Timeout Duration `json:"timeout,omitempty"`
	// Adjust lists the Adjustment fields a hook may set; empty means
	// DefaultAdjust (env, labels, annotations). An addition.
	Adjust []AdjustField `json:"adjust,omitempty"`
	// HostPaths are the absolute path prefixes on the node a hook's mounts
	// and devices may use; a mount or device elsewhere is refused. An
	// addition.
	HostPaths []string `json:"hostPaths,omitempty"`
}

// Duration is a time.Duration written as a Go duration string in manifests.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string such as "250ms".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads a duration string such as "250ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks the manifest's own consistency (not the .wasm file) and
// fills defaults. Errors name the offending field.
//
// A manifest that sets Image is a reference manifest: the artifact it names
// carries the module and its own manifest (abi, kinds, version, sha256,
// wasm, the permissions it asks for), so those fields are left out here
// and wasm and image exclude each other; name, config, mode, failurePolicy
// and order are the node's, and permissions is the grant the artifact's
// request must stay within. The host validates the effective manifest (the
// artifact's with the node's settings) again before loading it.
func (m *Manifest) Validate() error {
	if !nameRE.MatchString(m.Name) {
		return fmt.Errorf("name %q: must be 1-63 lowercase letters, digits or dashes", m.Name)
	}
	if m.Image != "" {
		return m.validateReference()
	}
	if m.Verification != nil {
		return fmt.Errorf("verification: only a manifest with image (a plugin in a registry) is verified")
	}
	switch m.ABI {
	case V1, Extism:
	case "":
		return fmt.Errorf("abi: missing (want %q or %q)", V1, Extism)
	default:
		return fmt.Errorf("abi %q: unsupported (want %q or %q)", m.ABI, V1, Extism)
	}
	if len(m.Kinds) == 0 {
		return fmt.Errorf("kinds: at least one of source, admission, hook is required")
	}
	seen := map[Kind]bool{}
	for _, k := range m.Kinds {
		if ExportForKind(k) == "" {
			return fmt.Errorf("kinds: unknown kind %q", k)
		}
		if seen[k] {
			return fmt.Errorf("kinds: %q listed twice", k)
		}
		seen[k] = true
	}
	if m.Wasm == "" {
		m.Wasm = m.Name + ".wasm"
	}
	if m.SHA256 == "" {
		return fmt.Errorf("sha256: missing")
	}
	if err := m.validatePoints(); err != nil {
		return err
	}
	return m.validateNodeSettings()
}

// validateNodeSettings checks and defaults the fields both manifest forms
// share: failurePolicy, mode and permissions.
func (m *Manifest) validateNodeSettings() error {
	switch m.FailurePolicy {
	case "":
		m.FailurePolicy = FailurePolicyFail
	case FailurePolicyFail, FailurePolicyIgnore:
	default:
		return fmt.Errorf("failurePolicy %q: want Fail or Ignore", m.FailurePolicy)
	}
	switch m.Mode {
	case "":
		m.Mode = ModeEnforce
	case ModeEnforce:
	case ModeMonitor:
		for _, k := range m.Kinds {
			if k != KindAdmission {
				return fmt.Errorf("mode %q: only admission plugins can monitor; kinds include %q", m.Mode, k)
			}
		}
	default:
		return fmt.Errorf("mode %q: want %s or %s", m.Mode, ModeEnforce, ModeMonitor)
	}
	if m.Permissions.Timeout.Duration < 0 {
		return fmt.Errorf("permissions.timeout: must not be negative")
	}
	return m.Permissions.validateAdjust()
}

// validatePoints checks the hook points: known, each once, hook plugins
// only.
func (m *Manifest) validatePoints() error {
	if len(m.Points) == 0 {
		return nil
	}
	if !m.HasKind(KindHook) {
		return fmt.Errorf("points: only hook plugins have points; kinds are %v", m.Kinds)
	}
	seen := map[HookPoint]bool{}
	for _, p := range m.Points {
		if !slices.Contains(HookPoints, p) {
			return fmt.Errorf("points: unknown point %q (want one of %v)", p, HookPoints)
		}
		if seen[p] {
			return fmt.Errorf("points: %q listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// validateAdjust checks permissions.adjust and permissions.hostPaths:
// known fields, each once; absolute clean prefixes, and only with mounts or
// devices to use them (which need at least one).
func (p *Permissions) validateAdjust() error {
	seen := map[AdjustField]bool{}
	for _, f := range p.Adjust {
		if !knownAdjustField(f) {
			return fmt.Errorf("permissions.adjust: unknown field %q (want some of %v)", f, AdjustFields)
		}
		if seen[f] {
			return fmt.Errorf("permissions.adjust: %q listed twice", f)
		}
		seen[f] = true
	}
	for i, hp := range p.HostPaths {
		if !path.IsAbs(hp) || path.Clean(hp) != hp {
			return fmt.Errorf("permissions.hostPaths[%d] %q: must be an absolute, clean path", i, hp)
		}
	}
	paths := seen[AdjustMounts] || seen[AdjustDevices]
	if len(p.HostPaths) > 0 && !paths {
		return fmt.Errorf("permissions.hostPaths: only mounts and devices use host paths; permissions.adjust lists neither")
	}
	if paths && len(p.HostPaths) == 0 {
		return fmt.Errorf("permissions.adjust: mounts and devices need permissions.hostPaths, the host path prefixes they may use")
	}
	return nil
}

// CallsAt reports whether the hook plugin is called at point p: p is in
// Points, or Points is empty and p is in DefaultHookPoints.
func (m *Manifest) CallsAt(p HookPoint) bool {
	if len(m.Points) == 0 {
		return slices.Contains(DefaultHookPoints, p)
	}
	return slices.Contains(m.Points, p)
}

// imageRE is the shape of an image reference: a registry host, a
// repository path, then a tag, a digest or both. The host parses it fully.
var imageRE = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[0-9a-f]{64})?$`)

// validateReference checks a reference manifest (Image set): the fields the
// artifact supplies must be left out, the node's own settings are checked
// as in any manifest. Mode monitor is checked against the kinds once the
// artifact's manifest is known.
func (m *Manifest) validateReference() error {
	if !imageRE.MatchString(m.Image) || !strings.ContainsAny(m.Image[strings.LastIndex(m.Image, "/"):], ":@") {
		return fmt.Errorf("image %q: want REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST", m.Image)
	}
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"wasm", m.Wasm != ""}, {"sha256", m.SHA256 != ""}, {"abi", m.ABI != ""},
		{"kinds", len(m.Kinds) > 0}, {"version", m.Version != ""}, {"points", len(m.Points) > 0},
	} {
		if f.set {
			return fmt.Errorf("%s: a manifest with image takes it from the artifact's own manifest; leave it out", f.field)
		}
	}
	if v := m.Verification; v != nil {
		for i, id := range v.Keyless {
			if id.Issuer == "" {
				return fmt.Errorf("verification.keyless[%d].issuer: missing", i)
			}
			if id.Subject == "" && id.SubjectRegExp == "" {
				return fmt.Errorf("verification.keyless[%d]: subject or subjectRegExp is required", i)
			}
			if id.SubjectRegExp != "" {
				if _, err := regexp.Compile(id.SubjectRegExp); err != nil {
					return fmt.Errorf("verification.keyless[%d].subjectRegExp: %v", i, err)
				}
			}
		}
		if len(v.Keyless) > 0 && v.TrustedRoot == "" {
			return fmt.Errorf("verification.trustedRoot: required with keyless identities")
		}
	}
	return m.validateNodeSettings()
}

// Reference reports whether the manifest names its plugin by image (a
// reference manifest) rather than by a module beside it.
func (m *Manifest) Reference() bool { return m.Image != "" }

// Required reports whether v asks for any signature at all.
func (v *Verification) Required() bool {
	return v != nil && (len(v.Keys) > 0 || len(v.Keyless) > 0)
}

// Monitoring reports whether the plugin runs in monitor mode.
func (m *Manifest) Monitoring() bool { return m.Mode == ModeMonitor }

// HasKind reports whether the manifest declares kind k.
func (m *Manifest) HasKind(k Kind) bool {
	for _, x := range m.Kinds {
		if x == k {
			return true
		}
	}
	return false
}
