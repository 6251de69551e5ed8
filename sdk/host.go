package sdk

import (
	"errors"
	"fmt"

	"github.com/wasmlet/wasmlet/abi"
)

// The host services a plugin may use. In a wasm build they are ABI v1 host
// imports; natively they are served by the NativeHost given to UseNativeHost.

// LogLevel is a log level of Log.
type LogLevel = abi.LogLevel

// Log levels.
const (
	LevelDebug = abi.LogDebug
	LevelInfo  = abi.LogInfo
	LevelWarn  = abi.LogWarn
	LevelError = abi.LogError
)

// HTTPRequest is a request for HTTP; its host must be in the manifest's
// permissions.allowedHosts.
type HTTPRequest = abi.HTTPRequest

// HTTPResponse is the answer to an HTTPRequest.
type HTTPResponse = abi.HTTPResponse

// NodeInfo describes the node the agent runs as.
type NodeInfo = abi.NodeInfo

// ErrDenied is returned when the manifest's permissions do not allow a call.
var ErrDenied = errors.New("denied by the plugin's permissions")

// Log writes msg to the host's log, attributed to the plugin.
func Log(level LogLevel, msg string) { hostLog(level, msg) }

// Logf formats and logs a message.
func Logf(level LogLevel, format string, args ...any) {
	hostLog(level, fmt.Sprintf(format, args...))
}

// Config returns the manifest's config value for key. While a policy of a
// Bundle runs, it returns the value of "<policy>.<key>" when the manifest
// sets that, else the value of key (the bundle-wide default).
func Config(key string) (value string, ok bool) {
	if s := running.scope.Load(); s != nil {
		if v, err := hostConfig(s.name + "." + key); err == nil {
			return v, true
		}
	}
	v, err := hostConfig(key)
	if err != nil {
		return "", false
	}
	return v, true
}

// KVGet returns the plugin's stored value for key; ok is false when absent.
func KVGet(key string) (value []byte, ok bool, err error) {
	b, err := hostKVGet(key)
	if errors.Is(err, errNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kv get %q: %w", key, err)
	}
	return b, true, nil
}

// KVSet stores value under key in the plugin's store.
func KVSet(key string, value []byte) error {
	if err := hostKVSet(key, value); err != nil {
		return fmt.Errorf("kv set %q: %w", key, err)
	}
	return nil
}

// KVDelete removes key from the plugin's store; a missing key is not an error.
func KVDelete(key string) error {
	if err := hostKVDelete(key); err != nil && !errors.Is(err, errNotFound) {
		return fmt.Errorf("kv delete %q: %w", key, err)
	}
	return nil
}

// HTTP performs an HTTP request through the host. A transport failure or a
// denial is an error; any HTTP status is not.
func HTTP(req HTTPRequest) (HTTPResponse, error) {
	out, err := hostHTTP(encodeHTTPRequest(req))
	if err != nil && len(out) == 0 {
		return HTTPResponse{}, fmt.Errorf("http %s %s: %w", req.Method, req.URL, err)
	}
	resp, derr := decodeHTTPResponse(out)
	if derr != nil {
		return HTTPResponse{}, fmt.Errorf("http %s %s: bad response from host: %w", req.Method, req.URL, derr)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("http %s %s: %s", req.Method, req.URL, resp.Error)
	}
	if err != nil {
		return resp, fmt.Errorf("http %s %s: %w", req.Method, req.URL, err)
	}
	return resp, nil
}

// ThisNode describes the node the agent runs as.
func ThisNode() (NodeInfo, error) {
	b, err := hostNodeInfo()
	if err != nil {
		return NodeInfo{}, fmt.Errorf("node info: %w", err)
	}
	ni, err := decodeNodeInfo(b)
	if err != nil {
		return NodeInfo{}, fmt.Errorf("node info: bad response from host: %w", err)
	}
	return ni, nil
}

var errNotFound = errors.New("not found")

// errnoError maps a negative import status to an error.
func errnoError(n int32) error {
	switch e := abi.Errno(n); e {
	case abi.ErrnoNotFound:
		return errNotFound
	case abi.ErrnoDenied:
		return ErrDenied
	default:
		return fmt.Errorf("host: %s (errno %d)", e, n)
	}
}
