package sdk

import "sync"

// NativeHost serves the host services (Config, Log, KV, HTTP, ThisNode) when
// a plugin is built natively, for its unit tests. A wasm build ignores it and
// talks to the real host.
type NativeHost struct {
	// Config answers Config.
	Config map[string]string
	// KV is the key-value store of KVGet, KVSet and KVDelete.
	KV map[string][]byte
	// HTTP answers HTTP; nil denies every request, like a manifest without
	// allowedHosts.
	HTTP func(HTTPRequest) HTTPResponse
	// Node answers ThisNode.
	Node NodeInfo
	// Log receives Log and Logf; nil writes to stderr.
	Log func(level LogLevel, msg string)

	mu sync.Mutex
}

var native struct {
	mu sync.Mutex
	h  *NativeHost
}

// UseNativeHost makes h serve the host services of a native build, and
// returns the previous one (nil for the default: empty config and store, no
// network). Tests typically call it first and restore it with t.Cleanup.
func UseNativeHost(h *NativeHost) (previous *NativeHost) {
	native.mu.Lock()
	defer native.mu.Unlock()
	previous, native.h = native.h, h
	return previous
}

var defaultNative NativeHost

func currentNative() *NativeHost {
	native.mu.Lock()
	defer native.mu.Unlock()
	if native.h == nil {
		return &defaultNative
	}
	return native.h
}
