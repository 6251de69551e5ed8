// Package abi holds the names and message types that the wasmlet host and its
// WebAssembly plugins share. It is the executable half of the written contract
// in abi/SPEC.md and abi/v1/SPEC.md and imports nothing but the standard
// library, so the host (host/internal/pluginhost) and the guest SDK (sdk/) can both depend
// on it without depending on each other.
//
// Everything exported here that names an ABI v1 export, import or message field
// is frozen: it may gain optional fields, never lose or change one.
package abi

// Version is an ABI version as written in a plugin manifest ("v1", "extism").
type Version string

const (
	// V1 is wasmlet's own ABI, on raw wazero. See abi/v1/SPEC.md.
	V1 Version = "v1"
	// Extism is a plugin built with an Extism PDK, loaded through the Extism
	// go-sdk; it exposes the same kinds over Extism's input/output.
	Extism Version = "extism"
)

// Kind is one role a plugin module can play. A module may implement several.
type Kind string

const (
	// KindSource returns pod updates, like the kubelet's file, URL and
	// apiserver sources.
	KindSource Kind = "source"
	// KindAdmission admits or rejects a pod, like the kubelet's PodAdmitHandler.
	KindAdmission Kind = "admission"
	// KindHook is called at pod and container lifecycle points and may return
	// adjustments.
	KindHook Kind = "hook"
)

// Kinds lists every kind in a stable order.
var Kinds = []Kind{KindSource, KindAdmission, KindHook}

// Guest exports of ABI v1.
const (
	// ExportVersionV1 is the version-marker export: a function with no
	// parameters and no results whose presence declares ABI v1.
	ExportVersionV1 = "wasmlet_abi_v1"
	// ExportVersionPrefix prefixes every version marker; the host reports a
	// marker of an unknown version as "wrong ABI version".
	ExportVersionPrefix = "wasmlet_abi_"
	// ExportInitialize is the WASI reactor initializer, called once per
	// instance before anything else when present.
	ExportInitialize = "_initialize"
	// ExportAlloc is `alloc(size i32) -> ptr i32`: guest memory for input the
	// host writes. 0 means the guest could not allocate.
	ExportAlloc = "wasmlet_alloc"
	// ExportAdmit is `admit(ptr i32, len i32) -> packed i64`, input AdmitRequest,
	// result AdmitResponse.
	ExportAdmit = "wasmlet_admit"
	// ExportSource is `source(ptr i32, len i32) -> packed i64`, input
	// SourceRequest, result SourceResponse.
	ExportSource = "wasmlet_source"
	// ExportHook is `hook(ptr i32, len i32) -> packed i64`, input HookRequest,
	// result HookResponse.
	ExportHook = "wasmlet_hook"
	// ExportReads is the optional `reads() -> i32`: the AdmitRequest fields
	// beyond pod the module reads, as a Reads bit set. The host calls it once
	// per loaded module, after _initialize, and leaves the fields whose bit
	// is clear out of the module's admission requests. Without it the module
	// gets every field. An addition to v1 (see CHANGELOG.md).
	ExportReads = "wasmlet_reads"
	// ExportCheckConfig is the optional `check_config() -> packed i64`: the
	// module's verdict on its config, read through the config_get import.
	// The host calls it once per loaded version, after _initialize (and
	// ExportReads); 0 accepts the config, a packed (ptr, len) UTF-8
	// message refuses it, and a refused config fails the load. A module
	// without it is never asked. An addition to v1 (see CHANGELOG.md).
	ExportCheckConfig = "wasmlet_check_config"
)

// CheckConfigMessageMax is how many bytes of a refusal message
// (ExportCheckConfig) the host keeps.
const CheckConfigMessageMax = 1024

// Reads is the bit set ExportReads returns: the optional fields of an
// AdmitRequest a module reads. Bits a host does not know are ignored.
type Reads uint32

const (
	// ReadsNode: the module reads AdmitRequest.Node.
	ReadsNode Reads = 1 << iota
	// ReadsPodsOnNode: the module reads AdmitRequest.PodsOnNode.
	ReadsPodsOnNode

	// ReadsAll is what a module without ExportReads is handed.
	ReadsAll = ReadsNode | ReadsPodsOnNode
)

// Omit returns r without the fields reads leaves out (r itself when it
// leaves out none): what a module that declared reads is handed.
func (r *AdmitRequest) Omit(reads Reads) *AdmitRequest {
	if reads&ReadsAll == ReadsAll {
		return r
	}
	c := *r
	if reads&ReadsNode == 0 {
		c.Node = nil
	}
	if reads&ReadsPodsOnNode == 0 {
		c.PodsOnNode = nil
	}
	return &c
}

// ExportForKind names the guest export that implements a kind.
func ExportForKind(k Kind) string {
	switch k {
	case KindSource:
		return ExportSource
	case KindAdmission:
		return ExportAdmit
	case KindHook:
		return ExportHook
	}
	return ""
}

// ImportModule is the module name of every host import of ABI v1.
const ImportModule = "wasmlet"

// Host imports of ABI v1, all in ImportModule. Functions that return
// variable-size data follow the "result buffer" convention: the guest passes a
// buffer (ptr, cap); the host writes min(n, cap) bytes and returns n, the full
// length. When n > cap the host keeps the whole result and the guest fetches
// it with ImportResultRead into a buffer of at least n bytes. A negative
// return is an Errno.
const (
	// ImportLog is `log(level i32, ptr i32, len i32)`.
	ImportLog = "log"
	// ImportConfigGet is `config_get(key_ptr, key_len, buf_ptr, buf_cap i32) -> i32`.
	ImportConfigGet = "config_get"
	// ImportKVGet is `kv_get(key_ptr, key_len, buf_ptr, buf_cap i32) -> i32`.
	ImportKVGet = "kv_get"
	// ImportKVSet is `kv_set(key_ptr, key_len, val_ptr, val_len i32) -> i32`.
	ImportKVSet = "kv_set"
	// ImportKVDelete is `kv_delete(key_ptr, key_len i32) -> i32`.
	ImportKVDelete = "kv_delete"
	// ImportHTTPRequest is `http_request(req_ptr, req_len, buf_ptr, buf_cap i32) -> i32`,
	// request HTTPRequest, result HTTPResponse.
	ImportHTTPRequest = "http_request"
	// ImportNodeInfo is `node_info(buf_ptr, buf_cap i32) -> i32`, result NodeInfo.
	ImportNodeInfo = "node_info"
	// ImportResultRead is `result_read(buf_ptr, buf_cap i32) -> i32`: copies the
	// pending result of the last host call that returned n > cap.
	ImportResultRead = "result_read"
)

// Errno is a negative status returned by a host import.
type Errno int32

const (
	// ErrnoNotFound: the key does not exist.
	ErrnoNotFound Errno = -1
	// ErrnoDenied: the manifest's permissions do not allow the call.
	ErrnoDenied Errno = -2
	// ErrnoInvalid: the guest passed out-of-bounds memory or malformed input.
	ErrnoInvalid Errno = -3
	// ErrnoFailed: the operation failed on the host side (details in the
	// result message where the call has one, else in the host log).
	ErrnoFailed Errno = -4
	// ErrnoTooLarge: a value exceeds the host's size limit.
	ErrnoTooLarge Errno = -5
	// ErrnoNoResult: result_read was called with no pending result.
	ErrnoNoResult Errno = -6
)

// String names an Errno.
func (e Errno) String() string {
	switch e {
	case ErrnoNotFound:
		return "not found"
	case ErrnoDenied:
		return "denied"
	case ErrnoInvalid:
		return "invalid argument"
	case ErrnoFailed:
		return "failed"
	case ErrnoTooLarge:
		return "too large"
	case ErrnoNoResult:
		return "no pending result"
	}
	return "unknown errno"
}

// LogLevel is the level argument of the log import.
type LogLevel int32

// Log levels, in increasing severity.
const (
	LogDebug LogLevel = 0
	LogInfo  LogLevel = 1
	LogWarn  LogLevel = 2
	LogError LogLevel = 3
)

// PackResult packs a guest result pointer and length into the i64 an export
// returns: the pointer in the high 32 bits, the length in the low 32 bits.
func PackResult(ptr, length uint32) uint64 {
	return uint64(ptr)<<32 | uint64(length)
}

// UnpackResult splits a packed export result. A zero pointer is an error.
func UnpackResult(packed uint64) (ptr, length uint32) {
	return uint32(packed >> 32), uint32(packed)
}
