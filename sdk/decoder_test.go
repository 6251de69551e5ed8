package sdk

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The tests that compare the decoder with Kubernetes' own decoding
// (sigs.k8s.io/json) are in wasmlet's root module, internal/sdkdecode, so
// this module requires nothing but abi.

func readPod4k(tb testing.TB) []byte {
	b, err := os.ReadFile("../testdata/pod4k.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodePod_Errors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring
	}{
		{"wrong type string", `{"metadata":{"name":5}}`, "into a string"},
		{"wrong type bool", `{"spec":{"hostNetwork":"true"}}`, "into a bool"},
		{"wrong type int", `{"spec":{"priority":"1"}}`, "into an integer"},
		{"float into int", `{"spec":{"priority":1.0}}`, "into int32"},
		{"int32 overflow", `{"spec":{"priority":2147483648}}`, "into int32"},
		{"exponent into int", `{"spec":{"priority":1e3}}`, "into int32"},
		{"leading zero", `{"x":01}`, "expected ','"},
		{"trailing comma object", `{"a":1,}`, "expected string"},
		{"trailing comma array", `{"a":[1,]}`, "invalid character"},
		{"missing colon", `{"a" 1}`, "expected ':'"},
		{"unterminated", `{"metadata":{"name":"abc`, "unterminated"},
		{"control char", "{\"metadata\":{\"name\":\"a\x01\"}}", "control character"},
		{"bad escape", `{"metadata":{"name":"\x"}}`, "invalid escape"},
		{"bad unicode escape", `{"metadata":{"name":"\u12G4"}}`, "invalid \\u escape"},
		{"trailing data", `{} {}`, "after top-level value"},
		{"not an object", `[]`, "expected object"},
		{"bad literal", `{"a":tru}`, "invalid literal"},
		{"empty input", ``, "expected object"},
		{"too deep", strings.Repeat(`{"x":`, maxDepth+2) + "1" + strings.Repeat("}", maxDepth+2), "max depth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodePod([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestDecodePod_Aliasing checks that decoded strings survive the caller
// reusing its buffer (DecodePod copies once).
func TestDecodePod_Aliasing(t *testing.T) {
	in := []byte(`{"metadata":{"name":"abc"}}`)
	p, err := DecodePod(in)
	if err != nil {
		t.Fatal(err)
	}
	copy(in, bytes.Repeat([]byte("x"), len(in)))
	if p.Name != "abc" {
		t.Fatalf("name changed to %q after the input was overwritten", p.Name)
	}
}

func BenchmarkDecodePod(b *testing.B) {
	data := readPod4k(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodePod(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePod_Skip(b *testing.B) {
	data := readPod4k(b)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		d := decoder{buf: data}
		d.skip()
		if err := d.end(); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecoder_Span checks span against the validating raw: on every value
// raw accepts, span ends at the same byte; on anything else it neither
// panics nor reads past the input.
func FuzzDecoder_Span(f *testing.F) {
	f.Add(readPod4k(f))
	for _, s := range []string{
		`[]`, `{}`, `null`, `1.5`, `"x"`, `[{"a":"]}\"[{"},["\\",{}]]`, `{"a":[1,{"b":"\u005d"}]}`,
		`[{"a":"é"}, {"b" : [ ] } ]`, `[`, `{"a":"`, `["\`, `[}`, `[{"a":1}]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := decoder{buf: data}
		want := r.raw()
		s := decoder{buf: data}
		got := s.span()
		if s.pos > len(data) {
			t.Fatalf("input %q: span ended at %d, past the input", data, s.pos)
		}
		if r.err == nil && (s.err != nil || !bytes.Equal(got, want)) {
			t.Fatalf("input %q: span %q (%v), raw %q", data, got, s.err, want)
		}
	})
}

func BenchmarkDecoder_Span(b *testing.B) {
	pod := readPod4k(b)
	data := []byte("[" + strings.Repeat(string(pod)+",", 29) + string(pod) + "]")
	b.SetBytes(int64(len(data)))
	for _, f := range []struct {
		name string
		step func(*decoder) []byte
	}{{"raw", (*decoder).raw}, {"span", (*decoder).span}} {
		b.Run(f.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				d := decoder{buf: data}
				if f.step(&d); d.err != nil || d.pos != len(data) {
					b.Fatal(d.err)
				}
			}
		})
	}
}
