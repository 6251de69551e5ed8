package sdk

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	k8sjson "sigs.k8s.io/json"
)

// UnmarshalJSON lets the reference decoder (sigs.k8s.io/json, Kubernetes'
// case-sensitive encoding/json) read quantities written as numbers, as the
// SDK's decoder does. Test builds only.
func (r *ResourceList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if *r == nil {
		*r = ResourceList{}
	}
	for k, v := range raw {
		var s string
		switch {
		case string(v) == "null":
			s = ""
		case v[0] == '"':
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
		case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
			s = string(v)
		default:
			return &json.UnmarshalTypeError{Value: string(v), Type: reflect.TypeOf("")}
		}
		(*r)[k] = s
	}
	return nil
}

// reference decodes like the Kubernetes apiserver does.
func reference(data []byte, v any) error {
	return k8sjson.UnmarshalCaseSensitivePreserveInts(data, v)
}

func readPod4k(tb testing.TB) []byte {
	b, err := os.ReadFile("../testdata/pod4k.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodePod_Pod4k(t *testing.T) {
	data := readPod4k(t)
	got, err := DecodePod(data)
	if err != nil {
		t.Fatal(err)
	}
	var want Pod
	if err := reference(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodePod differs from the reference\n got %+v\nwant %+v", got, want)
	}
	// Spot checks, so the test fails if both decoders drop a field.
	c := got.Spec.Containers[0]
	switch {
	case got.Name != "checkout-7d9f8b6c5d-x2kqp" || got.Namespace != "shop":
		t.Errorf("metadata: %q/%q", got.Namespace, got.Name)
	case got.Labels["tier"] != "backend" || len(got.Annotations) != 3:
		t.Errorf("labels %v annotations %v", got.Labels, got.Annotations)
	case len(got.Spec.Containers) != 2 || len(got.Spec.InitContainers) != 1:
		t.Errorf("containers: %d init, %d app", len(got.Spec.InitContainers), len(got.Spec.Containers))
	case c.SecurityContext == nil || c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged:
		t.Errorf("securityContext: %+v", c.SecurityContext)
	case c.Resources.Limits["memory"] != "1Gi" || c.Ports[1].ContainerPort != 9090:
		t.Errorf("resources %v ports %v", c.Resources, c.Ports)
	case got.Spec.Priority == nil || *got.Spec.Priority != 100000 || got.Spec.SecurityContext.Sysctls[0].Value != "1024 65000":
		t.Errorf("priority/sysctls: %+v", got.Spec)
	case got.Status.Phase != "Pending":
		t.Errorf("phase %q", got.Status.Phase)
	}
}

func TestDecodePod_Cases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; empty: must match the reference
	}{
		{"empty object", `{}`, ""},
		{"null", `null`, ""},
		{"whitespace", " \t\n{ \"metadata\" : { \"name\" : \"a\" } } \r\n", ""},
		{"escapes", `{"metadata":{"name":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2d"}}`, ""},
		{"surrogate pair", `{"metadata":{"name":"\ud83d\ude00"}}`, ""},
		{"lone surrogate", `{"metadata":{"name":"\ud83dx"}}`, ""},
		{"high then bad low", `{"metadata":{"name":"\ud83d\u0041"}}`, ""},
		{"invalid utf8", "{\"metadata\":{\"name\":\"a\xffb\xc3\"}}", ""},
		{"utf8 passthrough", `{"metadata":{"name":"héllo wörld 中文"}}`, ""},
		{"escaped key", `{"metadata":{"n\u0061me":"x"}}`, ""},
		{"case-sensitive keys", `{"Metadata":{"Name":"x"},"metadata":{"NAME":"y"}}`, ""},
		{"null scalar keeps value", `{"metadata":{"name":"a","name":null}}`, ""},
		{"null pointer resets", `{"spec":{"priority":5,"priority":null}}`, ""},
		{"duplicate maps merge", `{"metadata":{"labels":{"a":"1"},"labels":{"b":"2"}}}`, ""},
		{"null map", `{"metadata":{"labels":{"a":"1"},"labels":null}}`, ""},
		{"empty slices stay non-nil", `{"spec":{"containers":[],"volumes":[]}}`, ""},
		{"null slice", `{"spec":{"containers":null}}`, ""},
		{"duplicate slices reuse elements", `{"spec":{"containers":[{"name":"a","image":"i"}],"containers":[{"name":"b"}]}}`, ""},
		{"quantities as numbers", `{"spec":{"containers":[{"resources":{"limits":{"cpu":2,"memory":1.5e9}}}]}}`, ""},
		{"negative ints", `{"spec":{"securityContext":{"runAsUser":-1,"supplementalGroups":[0,-5]}}}`, ""},
		{"unknown fields of every type", `{"x":[1,-2.5e+3,true,false,null,{"y":{"z":[]}},"s\n"],"metadata":{"name":"n"}}`, ""},
		{"hostPath", `{"spec":{"volumes":[{"name":"v","hostPath":{"path":"/var","type":"Directory"}}]}}`, ""},
		{"ephemeral", `{"spec":{"ephemeralContainers":[{"name":"d","targetContainerName":"x","securityContext":{"privileged":true}}]}}`, ""},
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
			got, err := DecodePod([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var want Pod
			if err := reference([]byte(tt.in), &want); err != nil {
				t.Fatalf("reference rejects the input: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("differs from the reference\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

func TestDecodeNode(t *testing.T) {
	in := []byte(`{"metadata":{"name":"n1","labels":{"zone":"a"}},"spec":{"unschedulable":true,"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]},"status":{"capacity":{"cpu":"2","pods":110},"allocatable":{"cpu":"1900m"},"conditions":[{"type":"Ready"}]}}`)
	got, err := DecodeNode(in)
	if err != nil {
		t.Fatal(err)
	}
	var want Node
	if err := reference(in, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got.Status.Capacity["pods"] != "110" || !got.Spec.Unschedulable {
		t.Fatalf("got %+v", got)
	}
}

// FuzzDecodePod checks the decoder against Kubernetes' own decoding: both
// accept or both reject, and what both accept decodes to the same value.
func FuzzDecodePod(f *testing.F) {
	f.Add(readPod4k(f))
	for _, s := range []string{
		`{}`, `null`, `{"metadata":{"name":"a\u00e9\ud83d\ude00","labels":{"a":"b"}}}`,
		`{"spec":{"containers":[{"name":"a","securityContext":{"privileged":true,"capabilities":{"add":["X"]}}}]}}`,
		`{"spec":{"priority":-5,"hostPID":true,"securityContext":{"sysctls":[{"name":"a","value":"b"}]}}}`,
		`{"spec":{"containers":[{"resources":{"limits":{"cpu":1}}}],"containers":[{}]}}`,
		`{"x":[{"y":null},1.5e-3,"\"",true]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodePod(data)
		var want Pod
		werr := reference(data, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("input %q: sdk error %v, reference error %v", data, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q: differs\n got %#v\nwant %#v", data, got, want)
		}
	})
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
