package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmlet/wasmlet/abi"
)

// GroupName is the API group of wasmlet's cluster resources.
const GroupName = "wasmlet.dev"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resources of the group, as the dynamic client names them.
var (
	// WasmletPlugins is the resource of WasmletPlugin objects.
	WasmletPlugins = SchemeGroupVersion.WithResource("wasmletplugins")
	// WasmletNodes is the resource of WasmletNode objects.
	WasmletNodes = SchemeGroupVersion.WithResource("wasmletnodes")
)

// AddToScheme registers this package's types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &WasmletPlugin{}, &WasmletPluginList{}, &WasmletNode{}, &WasmletNodeList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// WasmletPlugin declares a plugin every matching wasmlet node pulls,
// verifies and enforces. Its name is the plugin's name on the nodes.
type WasmletPlugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the declaration.
	Spec WasmletPluginSpec `json:"spec"`
}

// WasmletPluginSpec is what a node's reference manifest says, plus the
// nodes it applies to.
type WasmletPluginSpec struct {
	// Image names the plugin artifact: REGISTRY/REPOSITORY:TAG or
	// REGISTRY/REPOSITORY@sha256:DIGEST. A tag is re-resolved by each node
	// and a moved tag reloads the plugin.
	Image string `json:"image"`
	// Verification lists the signatures the artifact must carry, beyond
	// what each node's own verification policy asks.
	Verification *Verification `json:"verification,omitempty"`
	// Config is handed to the plugin through the config_get import.
	Config map[string]string `json:"config,omitempty"`
	// Mode is enforce (the default) or monitor (admission plugins only).
	Mode abi.Mode `json:"mode,omitempty"`
	// FailurePolicy is Fail (the default) or Ignore.
	FailurePolicy abi.FailurePolicy `json:"failurePolicy,omitempty"`
	// Order sorts plugins of one kind (lower first; ties by name).
	Order int `json:"order,omitempty"`
	// Permissions is the grant: the most the artifact may ask for.
	Permissions abi.Permissions `json:"permissions,omitempty"`
	// NodeSelector picks the nodes by label; empty selects every node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Rollout says how the fleet takes up a change; nil takes it up at once.
	Rollout *Rollout `json:"rollout,omitempty"`
}

// Rollout paces a WasmletPlugin's changes across the fleet.
type Rollout struct {
	// Spread is the window a change is taken up in: each node that is
	// already running when the plugin appears or changes takes the change
	// up after a delay within the window, fixed for the node and the
	// plugin (a hash of both names), so the fleet pulls and compiles a new
	// version a few nodes at a time rather than all at once. A node that
	// starts meanwhile, and every removal, takes effect at once.
	Spread metav1.Duration `json:"spread,omitempty"`
}

// Verification is abi.Verification with every file inline: keys as PEM
// text, the trusted root as JSON text.
type Verification struct {
	// Keys are cosign public keys as inline PEM.
	Keys []string `json:"keys,omitempty"`
	// Keyless are the Fulcio certificate identities accepted for a keyless
	// signature, checked against TrustedRoot.
	Keyless []abi.KeylessIdentity `json:"keyless,omitempty"`
	// TrustedRoot is a Sigstore trusted_root.json as text; required with
	// Keyless.
	TrustedRoot string `json:"trustedRoot,omitempty"`
}

// WasmletPluginList is a list of WasmletPlugins.
type WasmletPluginList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the plugins.
	Items []WasmletPlugin `json:"items"`
}

// Source says where a node's plugin comes from.
type Source string

const (
	// SourceDirectory is the node's own plugin directory.
	SourceDirectory Source = "directory"
	// SourceAPI is a WasmletPlugin.
	SourceAPI Source = "api"
)

// WasmletNode is one node's report of its plugins, named after the node and
// written by it only when the report changes (its liveness is the node's
// Lease).
type WasmletNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is the report.
	Status WasmletNodeStatus `json:"status,omitempty"`
}

// WasmletNodeStatus is what a node enforces.
type WasmletNodeStatus struct {
	// Enforced counts the plugins enforced (for kubectl's column).
	Enforced int32 `json:"enforced"`
	// Plugins are the node's plugins, by name.
	Plugins []PluginStatus `json:"plugins,omitempty"`
	// UpdateTime is when the node last changed this report.
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
}

// PluginStatus is one plugin on a node.
type PluginStatus struct {
	// Name is the plugin's name (a WasmletPlugin's name for source api).
	Name string `json:"name"`
	// Source is directory or api.
	Source Source `json:"source"`
	// Image is the reference the plugin was pulled from, if any.
	Image string `json:"image,omitempty"`
	// Digest is the enforced artifact's manifest digest.
	Digest string `json:"digest,omitempty"`
	// Version is the enforced plugin's version.
	Version string `json:"version,omitempty"`
	// Mode is the enforced version's mode.
	Mode abi.Mode `json:"mode,omitempty"`
	// Enforced is true while a version of the plugin serves.
	Enforced bool `json:"enforced"`
	// Error is the last load or resolve error: a refused new version
	// (the previous one still enforced) or why none loaded.
	Error string `json:"error,omitempty"`
	// ObservedGeneration is the WasmletPlugin's generation this entry
	// follows (source api).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// WaitingUntil is when the node takes up a newer generation of the
	// WasmletPlugin it has seen, waiting for its place in the plugin's
	// rollout spread (source api); unset when nothing waits.
	WaitingUntil *metav1.Time `json:"waitingUntil,omitempty"`
}

// WasmletNodeList is a list of WasmletNodes.
type WasmletNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the nodes' reports.
	Items []WasmletNode `json:"items"`
}
