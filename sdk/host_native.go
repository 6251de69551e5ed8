//go:build !wasip1

package sdk

import (
	"encoding/json"
	"os"
)

// Native builds serve the host services from the NativeHost (see
// nativehost.go), so a plugin's logic unit-tests with plain `go test`.

func hostLog(level LogLevel, msg string) {
	h := currentNative()
	if h.Log != nil {
		h.Log(level, msg)
		return
	}
	os.Stderr.WriteString("plugin: " + msg + "\n")
}

func hostConfig(key string) (string, error) {
	h := currentNative()
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.Config[key]
	if !ok {
		return "", errNotFound
	}
	return v, nil
}

func hostKVGet(key string) ([]byte, error) {
	h := currentNative()
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.KV[key]
	if !ok {
		return nil, errNotFound
	}
	return append([]byte(nil), v...), nil
}

func hostKVSet(key string, value []byte) error {
	h := currentNative()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.KV == nil {
		h.KV = map[string][]byte{}
	}
	h.KV[key] = append([]byte(nil), value...)
	return nil
}

func hostKVDelete(key string) error {
	h := currentNative()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.KV[key]; !ok {
		return errNotFound
	}
	delete(h.KV, key)
	return nil
}

// hostHTTP goes through JSON like the real import, so native tests exercise
// the SDK's request encoder and response decoder too.
func hostHTTP(req []byte) ([]byte, error) {
	h := currentNative()
	if h.HTTP == nil {
		return nil, ErrDenied
	}
	var r HTTPRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, err
	}
	return json.Marshal(h.HTTP(r))
}

func hostNodeInfo() ([]byte, error) {
	return json.Marshal(currentNative().Node)
}
