// Package sdk is the Go SDK for wasmlet plugins.
//
// A plugin is a `package main` that implements one or more of Admitter,
// Source and Hook and registers itself from init:
//
//	type policy struct{}
//
//	func (policy) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
//		for _, c := range req.Pod.Spec.AllContainers() {
//			if c.SecurityContext.IsPrivileged() {
//				return sdk.Deny("Privileged", "container "+c.Name+" is privileged"), nil
//			}
//		}
//		return sdk.Allow(), nil
//	}
//
//	func init() { sdk.Register(policy{}) }
//	func main() {}
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
//
// The SDK exports ABI v1 (abi/v1/SPEC.md) for the kinds the registered value
// implements, decodes requests with its own reflection-free JSON decoder into
// the pod types of this package, and encodes the answers. Decoding is most
// of a call's cost: a plugin that reads only a few fields registers with
// Reads, e.g. sdk.Register(policy{}, sdk.Reads(sdk.Resources)). Host services
// (Config, Log, KV, HTTP, ThisNode) are plain Go functions.
//
// Several admission policies go into one module with RegisterPolicies (a
// Bundle): they run in order on the one decoded request, the first denial
// is the verdict and its message names the policy, and while a policy runs
// Config(key) answers the manifest's "<policy>.<key>" before the plain
// "<key>":
//
//	func init() {
//		sdk.RegisterPolicies(
//			sdk.Policy{Name: "no-privileged", Admitter: noPrivileged{}, Reads: sdk.Reads(0)},
//			sdk.Policy{Name: "require-limits", Admitter: requireLimits{}, Reads: sdk.Reads(sdk.Resources)},
//		)
//	}
//
// One module costs an admission far less than one plugin per policy: the pod
// is decoded once and one Go runtime's code runs.
//
// The same package builds natively: the host services then talk to an
// in-process NativeHost, so the plugin's logic unit-tests with `go test`;
// sdk/sdktest runs a plugin's fixture cases natively, and wasmlet's
// plugintest (in the host's module) runs the compiled .wasm through the real
// plugin host.
//
// The SDK is a module of its own that requires only
// github.com/wasmlet/wasmlet/abi (standard library only), and it names what
// a plugin uses from the ABI (OpSet, HookPreCreate, EnvVar, KindAdmission …),
// so a plugin imports this package and nothing else of wasmlet's. It never
// imports the host, nor the host it.
package sdk

import (
	"fmt"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// Admitter is implemented by an admission plugin: it decides whether a pod
// may run on this node, like the kubelet's PodAdmitHandler.
type Admitter interface {
	// Admit returns the verdict for req.Pod. An error means the plugin could
	// not decide; the host then applies the manifest's failure policy.
	Admit(req AdmitRequest) (Verdict, error)
}

// Source is implemented by a pod source plugin, polled by the host.
type Source interface {
	// Poll returns the changes since the last poll. An error keeps the
	// source's last good state.
	Poll(req SourceRequest) (SourceResult, error)
}

// Hook is implemented by a lifecycle hook plugin. It is called at every
// point the manifest's points list (the five points of the initial ABI v1
// when it lists none) that the plugin does not handle with one of the
// point interfaces below.
type Hook interface {
	// Hook is called at req.Point and may return adjustments (honoured at
	// PreSandbox and PreCreate, as far as the manifest's
	// permissions.adjust allows). An error fails the step under failure
	// policy Fail.
	Hook(req HookRequest) (Adjustment, error)
}

// The point interfaces: a hook plugin implements those of the points it
// handles, as a containerd NRI plugin implements the events it subscribes
// to, and Hook for the others (or not at all). The SDK finds them by type
// assertion (Points lists what the registered plugin handles); the
// manifest's points must list each point beyond the initial five, or the
// host never calls it there.

// Validator is implemented by a hook that validates a container's final CRI
// config, after every plugin's PreCreate adjustments (point Validate,
// req.Config). Return Refuse(message) to refuse the container, nil to let
// it be created; another error fails the creation under failurePolicy Fail.
type Validator interface {
	Validate(req HookRequest) error
}

// PreUpdater is implemented by a hook told before a running container's
// resources change (point PreUpdate, req.Resources the new ones). An error
// fails the update under failurePolicy Fail.
type PreUpdater interface {
	PreUpdate(req HookRequest) error
}

// PostStopper is implemented by a hook told once a container has stopped
// (point PostStop, req.ExitCode and req.Reason).
type PostStopper interface {
	PostStop(req HookRequest) error
}

// AdmitRequest is what an Admitter is asked about. The node and the pods
// already on the node are decoded only when asked for.
type AdmitRequest struct {
	// Pod is the pod asking to be admitted.
	Pod Pod

	node []byte // raw v1.Node JSON, nil when absent
	pods []byte // raw JSON array of v1.Pod, nil when absent
}

// Node decodes the node the agent runs as. ok is false when the host sent
// none (standalone mode before registration). A plugin registered with Reads
// must name AdmitNode among its parts to be sent the node; without it Node
// returns an error (in a Bundle: the running policy's Reads).
func (r AdmitRequest) Node() (node Node, ok bool, err error) {
	if why := notSent(AdmitNode); why != "" {
		return Node{}, false, fmt.Errorf("admit request: node: not sent: %sAdmitNode", why)
	}
	if r.node == nil {
		return Node{}, false, nil
	}
	d := newDecoder(r.node)
	decodeNode(d, &node)
	if err := d.end(); err != nil {
		return Node{}, true, fmt.Errorf("admit request: node: %w", err)
	}
	return node, true, nil
}

// PodsOnNode decodes the pods already admitted on this node. A plugin
// registered with Reads must name AdmitPodsOnNode among its parts to be sent
// them; without it PodsOnNode returns an error (in a Bundle: the running
// policy's Reads).
func (r AdmitRequest) PodsOnNode() ([]Pod, error) {
	if why := notSent(AdmitPodsOnNode); why != "" {
		return nil, fmt.Errorf("admit request: podsOnNode: not sent: %sAdmitPodsOnNode", why)
	}
	if r.pods == nil {
		return nil, nil
	}
	d := newRequestDecoder(r.pods)
	var pods []Pod
	isNull := false
	for n := 0; d.elem(&n, &isNull); {
		decodePod(d, grow(&pods))
	}
	if err := d.end(); err != nil {
		return nil, fmt.Errorf("admit request: podsOnNode: %w", err)
	}
	return pods, nil
}

// Verdict is an admission decision, the kubelet's PodAdmitResult.
type Verdict struct {
	// Allowed is true when the pod may run.
	Allowed bool
	// Reason is a short CamelCase reason for a denial, e.g. "Privileged".
	Reason string
	// Message explains a denial to a human.
	Message string
}

// Allow admits the pod.
func Allow() Verdict { return Verdict{Allowed: true} }

// Deny rejects the pod with a CamelCase reason and a message.
func Deny(reason, message string) Verdict {
	return Verdict{Reason: reason, Message: message}
}

// SourceRequest is one poll of a Source.
type SourceRequest struct {
	// Seq counts polls since the plugin was loaded, from 1.
	Seq uint64
}

// PodUpdate is one operation on a set of pods (v1.Pod JSON each).
type PodUpdate = abi.PodUpdate

// Op is a pod update operation (SET, ADD, UPDATE, REMOVE, DELETE).
type Op = abi.Op

// The operations a source may return (abi.OpSet …).
const (
	// OpSet replaces the source's whole set of pods.
	OpSet = abi.OpSet
	// OpAdd adds pods.
	OpAdd = abi.OpAdd
	// OpUpdate changes pods.
	OpUpdate = abi.OpUpdate
	// OpRemove removes pods (they are killed).
	OpRemove = abi.OpRemove
	// OpDelete marks pods for graceful deletion.
	OpDelete = abi.OpDelete
)

// SourceResult is what a Source returns from a poll.
type SourceResult struct {
	// Updates are applied in order; none means "no change".
	Updates []PodUpdate
	// NextPoll asks for the next poll after this long; 0 keeps the host's
	// interval.
	NextPoll time.Duration
}

// HookPoint is a lifecycle point (PreSandbox, PreCreate, Validate,
// PostStart, PreUpdate, PreStop, PostStop, PodTerminated).
type HookPoint = abi.HookPoint

// The lifecycle points (abi.HookPreSandbox …).
const (
	// HookPreSandbox is called before a pod sandbox is created; adjustments
	// apply to the sandbox config.
	HookPreSandbox = abi.HookPreSandbox
	// HookPreCreate is called before a container is created; adjustments
	// apply to that container.
	HookPreCreate = abi.HookPreCreate
	// HookValidate is called with the container's final CRI config, which
	// a Validator may refuse.
	HookValidate = abi.HookValidate
	// HookPostStart is called after a container started.
	HookPostStart = abi.HookPostStart
	// HookPreUpdate is called before a running container's resources change.
	HookPreUpdate = abi.HookPreUpdate
	// HookPreStop is called before a container is stopped.
	HookPreStop = abi.HookPreStop
	// HookPostStop is called once a container has stopped, with its exit
	// code and reason.
	HookPostStop = abi.HookPostStop
	// HookPodTerminated is called once a pod's containers and sandbox are gone.
	HookPodTerminated = abi.HookPodTerminated
)

// HookPoints lists every lifecycle point in lifecycle order (a copy of
// abi.HookPoints).
var HookPoints = append([]HookPoint(nil), abi.HookPoints...)

// DefaultHookPoints are the points a hook whose manifest lists no points is
// called at (a copy of abi.DefaultHookPoints).
var DefaultHookPoints = append([]HookPoint(nil), abi.DefaultHookPoints...)

// EnvVar is an environment variable: a v1.EnvVar without valueFrom in a
// Container's Env, and what an Adjustment adds to a container. It is one
// type in both places.
type EnvVar = abi.EnvVar

// HookRequest is one call of a Hook.
type HookRequest struct {
	// Point is the lifecycle point.
	Point HookPoint
	// Pod is the pod concerned.
	Pod Pod
	// Container is the container concerned at container points, else nil.
	Container *Container
	// Config is the container's final CRI config, at Validate only.
	Config *ContainerConfig
	// Resources are the resources the container is being changed to, at
	// PreUpdate only.
	Resources *LinuxResources
	// ExitCode is the stopped container's exit code, at PostStop only (nil
	// when the runtime reports none).
	ExitCode *int32
	// Reason is the runtime's reason for the stop ("Completed", "Error",
	// "OOMKilled"), at PostStop only.
	Reason string
}

// Kind is one role a plugin plays: what Kinds lists and Handle serves.
type Kind = abi.Kind

// The kinds of plugin (abi.KindAdmission …).
const (
	// KindSource returns pod updates (a Source).
	KindSource = abi.KindSource
	// KindAdmission admits or rejects a pod (an Admitter).
	KindAdmission = abi.KindAdmission
	// KindHook is called at lifecycle points (a Hook).
	KindHook = abi.KindHook
)

// ConfigChecker is implemented by a plugin that checks its config when it
// is loaded, rather than failing at every call: CheckConfig reads the config
// with Config, as a call would, and returns an error saying what is wrong
// (nil accepts). A registered plugin implementing it gets the
// wasmlet_check_config export; the host calls it once per loaded version,
// and a refused config fails the load with the error's message (the
// previous version serving on). A host older than the export never calls
// it, so the calls must still cope with a config CheckConfig refuses.
type ConfigChecker interface {
	CheckConfig() error
}

// registered is the plugin value given to Register and what it implements.
var registered struct {
	admitter Admitter
	source   Source
	hook     Hook
	checker  ConfigChecker
	hooks    pointHooks
	unread   Parts // the parts of a pod left undecoded (Reads); zero decodes all
}

// pointHooks are the point interfaces a registered plugin implements.
type pointHooks struct {
	validator   Validator
	preUpdater  PreUpdater
	postStopper PostStopper
}

// any reports whether the plugin implements a point interface.
func (h pointHooks) any() bool {
	return h.validator != nil || h.preUpdater != nil || h.postStopper != nil
}

// Register makes p the plugin. p must implement at least one of Admitter,
// Source, Hook and the point interfaces (Validator, PreUpdater,
// PostStopper); the SDK serves exactly those (any of the hook ones makes it
// a hook plugin). Call it from init: in a wasm module built with
// -buildmode=c-shared, main never runs. Register panics when p implements
// nothing or when called twice.
//
// Without options every field of sdk.Pod is decoded. Reads(parts) decodes
// only the basic fields and the named parts, which makes a call cheaper.
func Register(p any, opts ...Option) {
	if registered.admitter != nil || registered.source != nil || registered.hook != nil || registered.hooks.any() {
		panic("sdk.Register called twice")
	}
	a, aok := p.(Admitter)
	s, sok := p.(Source)
	h, hok := p.(Hook)
	var ph pointHooks
	ph.validator, _ = p.(Validator)
	ph.preUpdater, _ = p.(PreUpdater)
	ph.postStopper, _ = p.(PostStopper)
	if !aok && !sok && !hok && !ph.any() {
		panic(fmt.Sprintf("sdk.Register: %T implements none of sdk.Admitter, sdk.Source, sdk.Hook, sdk.Validator, sdk.PreUpdater, sdk.PostStopper", p))
	}
	registered.admitter, registered.source, registered.hook, registered.hooks = a, s, h, ph
	registered.checker, _ = p.(ConfigChecker)
	registered.unread = 0
	for _, o := range opts {
		if o.reads {
			registered.unread = AllParts &^ o.parts
		}
	}
}

// Option is an option of Register.
type Option struct {
	reads bool
	parts Parts
}

// Reads is a Register option for a plugin that looks at only some parts of
// a pod: the pods of its requests (Pod, PodsOnNode, a hook's Pod and
// Container) get only the basic fields and the parts named decoded; the
// other parts are still checked to be valid JSON (not that their values
// have the right types) but read as empty (nil).
// Decoding is most of what a Go plugin's call costs, and most policies read
// a few fields: Reads(0) makes a call on a 4 KB pod ~30% cheaper.
//
// The parts also say which fields of an admission request beyond the pod
// the plugin reads: AdmitNode (AdmitRequest.Node) and AdmitPodsOnNode
// (AdmitRequest.PodsOnNode). The wasm module declares them to the host
// (the wasmlet_reads export), which then sends nothing else: a plugin that
// does not read the pods on the node does not pay for them, however many
// there are.
//
// The basic fields, always decoded: metadata name, generateName, namespace
// and uid; every spec field not in a part below (host namespaces, the pod's
// securityContext, restartPolicy, serviceAccountName, nodeName, priority …);
// each container's name, image, imagePullPolicy and securityContext; the
// status phase.
//
// The same decoding applies natively (Handle, DecodeAdmitRequest), so a
// plugin's unit tests see what the wasm module sees.
func Reads(parts Parts) Option { return Option{reads: true, parts: parts} }

// Parts is a set of optional parts of a pod, for Reads.
type Parts uint32

// The optional parts of a pod.
const (
	// Labels: metadata labels, annotations and ownerReferences.
	Labels Parts = 1 << iota
	// Volumes: spec.volumes.
	Volumes
	// Scheduling: spec nodeSelector and tolerations.
	Scheduling
	// Commands: each container's command, args and workingDir.
	Commands
	// Env: each container's env.
	Env
	// Ports: each container's ports.
	Ports
	// Resources: each container's resources (limits and requests).
	Resources
	// VolumeMounts: each container's volumeMounts.
	VolumeMounts
	// AdmitNode: an admission request's node (AdmitRequest.Node).
	AdmitNode
	// AdmitPodsOnNode: an admission request's pods on the node
	// (AdmitRequest.PodsOnNode).
	AdmitPodsOnNode

	// AllParts is every part: what a plugin registered without Reads gets.
	AllParts = Labels | Volumes | Scheduling | Commands | Env | Ports | Resources | VolumeMounts | AdmitNode | AdmitPodsOnNode
)

// reads is the wasmlet_reads answer: the admission request fields beyond the
// pod the registered plugin reads.
func reads() abi.Reads {
	var r abi.Reads
	if registered.unread&AdmitNode == 0 {
		r |= abi.ReadsNode
	}
	if registered.unread&AdmitPodsOnNode == 0 {
		r |= abi.ReadsPodsOnNode
	}
	return r
}

// Kinds lists the kinds the registered plugin implements, in abi.Kinds order.
func Kinds() []Kind { return filter(abi.Kinds, handles) }

// filter returns the elements of all that keep keeps, in order; nil for
// none.
func filter[T any](all []T, keep func(T) bool) []T {
	var out []T
	for _, x := range all {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func handles(k Kind) bool {
	switch k {
	case abi.KindAdmission:
		return registered.admitter != nil
	case abi.KindSource:
		return registered.source != nil
	case abi.KindHook:
		return registered.hook != nil || registered.hooks.any()
	}
	return false
}

// Points lists the lifecycle points the registered plugin handles, in
// lifecycle order: every point of DefaultHookPoints when it implements
// Hook (which it may also handle the other points with), and Validate,
// PreUpdate and PostStop when it implements Validator, PreUpdater and
// PostStopper. The manifest's points say where the host calls it; a point
// listed here beyond DefaultHookPoints needs to be listed there.
func Points() []HookPoint { return filter(abi.HookPoints, pointHandled) }

func pointHandled(p HookPoint) bool {
	switch p {
	case abi.HookValidate:
		return registered.hooks.validator != nil
	case abi.HookPreUpdate:
		return registered.hooks.preUpdater != nil
	case abi.HookPostStop:
		return registered.hooks.postStopper != nil
	}
	return registered.hook != nil
}

// callHook runs the registered plugin at req.Point: the point's interface
// when the plugin implements it, else Hook, else nothing.
func callHook(req HookRequest) (Adjustment, error) {
	h := registered.hooks
	switch {
	case req.Point == abi.HookValidate && h.validator != nil:
		return Adjustment{}, h.validator.Validate(req)
	case req.Point == abi.HookPreUpdate && h.preUpdater != nil:
		return Adjustment{}, h.preUpdater.PreUpdate(req)
	case req.Point == abi.HookPostStop && h.postStopper != nil:
		return Adjustment{}, h.postStopper.PostStop(req)
	case registered.hook != nil:
		return registered.hook.Hook(req)
	}
	return Adjustment{}, nil
}

// Handle runs the registered plugin on one request of the given kind, in
// ABI v1 JSON, and returns the response JSON, exactly as the wasm exports
// do. It takes ownership of in: decoded strings alias it, so the caller must
// not modify it afterwards. A plugin panic, a malformed request or a kind the
// plugin does not implement come back as the response's error field.
func Handle(kind Kind, in []byte) (out []byte) {
	defer func() {
		if r := recover(); r != nil {
			out = encodeError(kind, fmt.Sprintf("plugin panicked: %v", r))
		}
	}()
	if !handles(kind) {
		return encodeError(kind, fmt.Sprintf("plugin does not implement %s", kind))
	}
	switch kind {
	case abi.KindAdmission:
		req, err := decodeAdmitRequest(in)
		if err != nil {
			return encodeError(kind, err.Error())
		}
		v, err := registered.admitter.Admit(req)
		return encodeVerdict(v, err)
	case abi.KindSource:
		req, err := decodeSourceRequest(in)
		if err != nil {
			return encodeError(kind, err.Error())
		}
		res, err := registered.source.Poll(req)
		return encodeSourceResult(res, err)
	default: // abi.KindHook
		req, err := decodeHookRequest(in)
		if err != nil {
			return encodeError(kind, err.Error())
		}
		adj, err := callHook(req)
		return encodeHookResult(req.Point, adj, err)
	}
}

// CheckConfig runs the registered plugin's config check (ConfigChecker)
// natively, as the wasmlet_check_config export does: its error, nil when the
// config is accepted or the plugin does not check it. A panic is an error.
// Natively the config is the NativeHost's.
func CheckConfig() (err error) {
	c := registered.checker
	if c == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("config check panicked: %v", r)
		}
	}()
	return c.CheckConfig()
}

// DecodeAdmitRequest decodes an abi.AdmitRequest's JSON, for native tests
// that feed a plugin the same bytes the host would.
func DecodeAdmitRequest(data []byte) (AdmitRequest, error) {
	return decodeAdmitRequest(clone(data))
}

// newRequestDecoder is newDecoder for the pods of a request, decoding only
// the parts the registered plugin Reads.
func newRequestDecoder(buf []byte) *decoder {
	d := newDecoder(buf)
	d.parts = AllParts &^ registered.unread
	return d
}

func decodeAdmitRequest(buf []byte) (AdmitRequest, error) {
	var r AdmitRequest
	d := newRequestDecoder(buf)
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "pod":
			decodePod(d, &r.Pod)
		case "node": // decoded (and validated) by Node
			if raw := d.span(); string(raw) != "null" {
				r.node = raw
			}
		case "podsOnNode": // decoded (and validated) by PodsOnNode
			if raw := d.span(); string(raw) != "null" {
				r.pods = raw
			}
		default:
			d.skip()
		}
	}
	if err := d.end(); err != nil {
		return AdmitRequest{}, fmt.Errorf("admit request: %w", err)
	}
	return r, nil
}

func decodeSourceRequest(buf []byte) (SourceRequest, error) {
	var r SourceRequest
	d := decoder{buf: buf}
	for n := 0; d.field(&n); {
		if string(d.key) == "seq" {
			d.setUint64(&r.Seq)
		} else {
			d.skip()
		}
	}
	if err := d.end(); err != nil {
		return SourceRequest{}, fmt.Errorf("source request: %w", err)
	}
	return r, nil
}

func decodeHookRequest(buf []byte) (HookRequest, error) {
	var r HookRequest
	d := newRequestDecoder(buf)
	for n := 0; d.field(&n); {
		switch string(d.key) {
		case "point":
			var s string
			d.setStr(&s)
			r.Point = HookPoint(s)
		case "pod":
			decodePod(d, &r.Pod)
		case "container":
			if d.null() {
				r.Container = nil
				continue
			}
			if r.Container == nil {
				r.Container = new(Container)
			}
			decodeContainer(d, r.Container)
		case "config":
			setNew(d, &r.Config, decodeContainerConfig)
		case "resources":
			setNew(d, &r.Resources, decodeLinuxResources)
		case "exitCode":
			setPtr(d, &r.ExitCode, &d.int32s, (*decoder).setInt32)
		case "reason":
			d.setStr(&r.Reason)
		default:
			d.skip()
		}
	}
	if err := d.end(); err != nil {
		return HookRequest{}, fmt.Errorf("hook request: %w", err)
	}
	return r, nil
}

// DecodeHookRequest decodes an abi.HookRequest's JSON as the wasm export
// does (the pod's parts as the registered plugin Reads them), for native
// tests that feed a plugin the same bytes the host would.
func DecodeHookRequest(data []byte) (HookRequest, error) {
	return decodeHookRequest(clone(data))
}
