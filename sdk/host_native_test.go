//go:build !wasip1

package sdk

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestHostServices_Native checks the host services of a native build against
// a NativeHost, through the same JSON the wasm imports carry.
func TestHostServices_Native(t *testing.T) {
	var logs []string
	h := &NativeHost{
		Config: map[string]string{"mode": "strict"},
		Node:   NodeInfo{Name: "node-a", Labels: map[string]string{"zone": "z1"}, Capacity: map[string]string{"cpu": "2"}},
		HTTP: func(r HTTPRequest) HTTPResponse {
			if r.URL == "https://down.example.com/" {
				return HTTPResponse{Error: "connection refused"}
			}
			return HTTPResponse{Status: 200, Headers: map[string]string{"Content-Type": "text/plain"}, Body: append([]byte("echo: "), r.Body...)}
		},
		Log: func(level LogLevel, msg string) { logs = append(logs, msg) },
	}
	prev := UseNativeHost(h)
	t.Cleanup(func() { UseNativeHost(prev) })

	if v, ok := Config("mode"); !ok || v != "strict" {
		t.Errorf("Config(mode) = %q, %v", v, ok)
	}
	if _, ok := Config("absent"); ok {
		t.Error("Config(absent) found")
	}
	if _, ok, err := KVGet("k"); ok || err != nil {
		t.Errorf("KVGet before set: %v %v", ok, err)
	}
	if err := KVSet("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := KVGet("k"); !ok || err != nil || string(v) != "v1" {
		t.Errorf("KVGet = %q %v %v", v, ok, err)
	}
	if err := KVDelete("k"); err != nil {
		t.Error(err)
	}
	if err := KVDelete("k"); err != nil {
		t.Errorf("deleting a missing key: %v", err)
	}
	resp, err := HTTP(HTTPRequest{Method: "POST", URL: "https://api.example.com/", Body: []byte("hi")})
	if err != nil || resp.Status != 200 || string(resp.Body) != "echo: hi" || resp.Headers["Content-Type"] != "text/plain" {
		t.Errorf("HTTP = %+v, %v", resp, err)
	}
	if _, err := HTTP(HTTPRequest{Method: "GET", URL: "https://down.example.com/"}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("HTTP to a failing host: %v", err)
	}
	node, err := ThisNode()
	if err != nil || !reflect.DeepEqual(node, h.Node) {
		t.Errorf("ThisNode = %+v, %v", node, err)
	}
	Logf(LevelInfo, "n=%d", 3)
	if !reflect.DeepEqual(logs, []string{"n=3"}) {
		t.Errorf("logs %q", logs)
	}

	UseNativeHost(&NativeHost{})
	if _, err := HTTP(HTTPRequest{Method: "GET", URL: "https://x/"}); !errors.Is(err, ErrDenied) {
		t.Errorf("HTTP without a handler: %v, want ErrDenied", err)
	}
}
