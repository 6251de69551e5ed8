package pluginhost

import (
	"encoding/json"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

// FuzzDecodeResult feeds arbitrary guest results to the decoder of each
// response type: it must return an error or a value, never panic, and
// accept only exactly one valid JSON value.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`{"allowed":true}`, `{"updates":[{"op":"SET","pods":[{}]}]}`,
		`{"adjustment":{"env":[{"name":"A","value":"1"}]}}`, `not json {`, ``, `null`, `{"allowed":"yes"}`, "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{&abi.AdmitResponse{}, &abi.SourceResponse{}, &abi.HookResponse{}} {
			if err := decodeResult(b, v); err == nil && !json.Valid(b) {
				t.Fatalf("decodeResult accepted %q into %T", b, v)
			}
		}
	})
}
