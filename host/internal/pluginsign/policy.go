package pluginsign

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
)

// The apiVersion and kind of a node policy file.
const (
	PolicyAPIVersion = "wasmlet.dev/v1alpha1"
	PolicyKind       = "PluginVerificationPolicy"
)

// NodePolicy is the node-wide verification of plugins from a registry:
//
//	apiVersion: wasmlet.dev/v1alpha1
//	kind: PluginVerificationPolicy
//	requireSignature: true
//	verification:
//	  keys: [team.pub]
//
// A plugin must pass Verification (when it lists a key or an identity)
// besides its own manifest's; with RequireSignature, a plugin for which
// neither lists anything is refused.
type NodePolicy struct {
	// APIVersion is wasmlet.dev/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind is PluginVerificationPolicy.
	Kind string `json:"kind"`
	// RequireSignature refuses a plugin whose signatures nobody asks to
	// check.
	RequireSignature bool `json:"requireSignature,omitempty"`
	// Verification is what every plugin's signatures must pass; relative
	// paths are relative to the policy file.
	Verification *abi.Verification `json:"verification,omitempty"`
	// File is the file the policy was read from.
	File string `json:"-"`
}

// LoadNodePolicy reads a node policy file, strictly: an unknown field, a
// wrong apiVersion or kind, or keys and a trusted root that cannot be read
// are errors naming the file and the field.
func LoadNodePolicy(path string) (*NodePolicy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	p := &NodePolicy{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrPolicy, path, err)
	}
	p.File = path
	if p.APIVersion != PolicyAPIVersion {
		return nil, fmt.Errorf("%w: %s: apiVersion %q, want %s", ErrPolicy, path, p.APIVersion, PolicyAPIVersion)
	}
	if p.Kind != PolicyKind {
		return nil, fmt.Errorf("%w: %s: kind %q, want %s", ErrPolicy, path, p.Kind, PolicyKind)
	}
	// The keys and the trusted root are read now, so that a broken policy
	// is reported when it is loaded rather than at the first plugin.
	if _, err := newChecker(p.Verification, filepath.Dir(path), "node policy "+path); err != nil {
		return nil, err
	}
	return p, nil
}
