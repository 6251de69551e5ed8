//go:build !wasip1

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

// recorder is a bundle policy that appends its name to *log and answers
// with verdict and err; check, when set, runs first.
func recorder(name string, log *[]string, v Verdict, err error, reads Option, check func(AdmitRequest)) Policy {
	return Policy{Name: name, Reads: reads, Admitter: testPlugin{admit: func(r AdmitRequest) (Verdict, error) {
		*log = append(*log, name)
		if check != nil {
			check(r)
		}
		return v, err
	}}}
}

// admitJSON runs the registered plugin through Handle, as the wasm export
// does, and decodes the answer.
func admitJSON(t *testing.T, req string) abi.AdmitResponse {
	t.Helper()
	var resp abi.AdmitResponse
	if err := json.Unmarshal(Handle(abi.KindAdmission, []byte(req)), &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

const bundlePod = `{"pod":{"metadata":{"name":"p","namespace":"ns","labels":{"a":"b"}},` +
	`"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1"}}}]}},` +
	`"podsOnNode":[{"metadata":{"name":"q"}}]}`

func TestBundle_OrderAndFirstDenial(t *testing.T) {
	var log []string
	b := NewBundle(
		recorder("first", &log, Allow(), nil, Reads(0), nil),
		recorder("second", &log, Deny("Nope", "container c is bad"), nil, Reads(0), nil),
		recorder("third", &log, Deny("Other", "never asked"), nil, Reads(0), nil),
	)
	use(t, b, b.Reads())
	resp := admitJSON(t, bundlePod)
	if resp.Allowed || resp.Reason != "Nope" || resp.Message != "second: container c is bad" || resp.Error != "" {
		t.Errorf("response %+v, want the second policy's denial named", resp)
	}
	if want := []string{"first", "second"}; !reflect.DeepEqual(log, want) {
		t.Errorf("ran %v, want %v (in order, none after the denial)", log, want)
	}

	log = nil
	all := NewBundle(
		recorder("z", &log, Allow(), nil, Reads(0), nil),
		recorder("a", &log, Allow(), nil, Reads(0), nil),
		recorder("m", &log, Allow(), nil, Reads(0), nil),
	)
	if v, err := all.Admit(AdmitRequest{}); !v.Allowed || err != nil {
		t.Errorf("every policy allows: %+v, %v", v, err)
	}
	if want := []string{"z", "a", "m"}; !reflect.DeepEqual(log, want) {
		t.Errorf("ran %v, want the given order %v", log, want)
	}

	log = nil
	empty := NewBundle(recorder("quiet", &log, Verdict{Reason: "Quiet"}, nil, Reads(0), nil))
	if v, _ := empty.Admit(AdmitRequest{}); v.Allowed || v.Reason != "Quiet" || v.Message != "quiet" {
		t.Errorf("a denial without a message: %+v, want the policy's name as the message", v)
	}
}

var errBroken = errors.New("config x: broken")

func TestBundle_Error(t *testing.T) {
	var log []string
	b := NewBundle(
		recorder("ok", &log, Allow(), nil, Reads(0), nil),
		recorder("broken", &log, Verdict{}, errBroken, Reads(0), nil),
		recorder("after", &log, Deny("X", "y"), nil, Reads(0), nil),
	)
	_, err := b.Admit(AdmitRequest{})
	if !errors.Is(err, errBroken) || err.Error() != "broken: config x: broken" {
		t.Errorf("error %v, want errBroken wrapped with the policy's name", err)
	}
	if want := []string{"ok", "broken"}; !reflect.DeepEqual(log, want) {
		t.Errorf("ran %v, want %v", log, want)
	}
	use(t, b, b.Reads())
	if resp := admitJSON(t, bundlePod); resp.Error != "broken: config x: broken" {
		t.Errorf("response %+v, want the error named", resp)
	}

	panicky := NewBundle(Policy{Name: "panicky", Reads: Reads(0), Admitter: testPlugin{admit: func(AdmitRequest) (Verdict, error) {
		panic("boom")
	}}})
	if _, err := panicky.Admit(AdmitRequest{}); err == nil || err.Error() != "panicky: panicked: boom" {
		t.Errorf("a panic: %v, want an error naming the policy", err)
	}
	if PolicyName() != "" {
		t.Errorf("after a panic PolicyName() = %q, want none running", PolicyName())
	}
}

func TestBundle_Reads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads []Option
		want  Option
		abi   abi.Reads
	}{
		{"basic fields only", []Option{Reads(0), Reads(0)}, Reads(0), 0},
		{"the union", []Option{Reads(0), Reads(Resources), Reads(Labels | AdmitNode)}, Reads(Resources | Labels | AdmitNode), abi.ReadsNode},
		{"podsOnNode from one", []Option{Reads(0), Reads(AdmitPodsOnNode)}, Reads(AdmitPodsOnNode), abi.ReadsPodsOnNode},
		{"a policy without Reads reads all", []Option{Reads(0), {}}, Option{}, abi.ReadsAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []Policy
			var log []string
			for i, r := range tc.reads {
				ps = append(ps, recorder(string(rune('a'+i)), &log, Allow(), nil, r, nil))
			}
			b := NewBundle(ps...)
			if got := b.Reads(); got != tc.want {
				t.Errorf("Reads() = %+v, want %+v", got, tc.want)
			}
			use(t, b, b.Reads())
			if got := reads(); got != tc.abi {
				t.Errorf("wasmlet_reads answer %b, want %b", got, tc.abi)
			}
		})
	}

	// The pod is decoded once with the union: each policy sees the parts
	// the bundle reads; Node and PodsOnNode answer only the policies that
	// read them.
	var log []string
	var limits, labels []string
	var podsErr []error
	check := func(r AdmitRequest) {
		limits = append(limits, r.Pod.Spec.Containers[0].Resources.Limits["cpu"])
		labels = append(labels, r.Pod.Labels["a"])
		_, err := r.PodsOnNode()
		podsErr = append(podsErr, err)
	}
	b := NewBundle(
		recorder("limits", &log, Allow(), nil, Reads(Resources|AdmitPodsOnNode), check),
		recorder("basic", &log, Allow(), nil, Reads(0), check),
	)
	use(t, b, b.Reads())
	if resp := admitJSON(t, bundlePod); !resp.Allowed {
		t.Fatalf("response %+v", resp)
	}
	if !reflect.DeepEqual(limits, []string{"1", "1"}) || !reflect.DeepEqual(labels, []string{"", ""}) {
		t.Errorf("limits %q, labels %q: want resources decoded, labels not", limits, labels)
	}
	if podsErr[0] != nil || podsErr[1] == nil || !strings.Contains(podsErr[1].Error(), "policy basic") {
		t.Errorf("PodsOnNode errors %v, want nil for limits and one naming basic", podsErr)
	}
}

func TestBundle_Config(t *testing.T) {
	prev := UseNativeHost(&NativeHost{Config: map[string]string{
		"mode":       "bundle-wide",
		"a.mode":     "a's own",
		"a.only":     "x",
		"b.disabled": "",
	}})
	t.Cleanup(func() { UseNativeHost(prev) })
	seen := map[string][]string{}
	read := func(name string) Policy {
		return Policy{Name: name, Reads: Reads(0), Admitter: testPlugin{admit: func(AdmitRequest) (Verdict, error) {
			for _, k := range []string{"mode", "only", "disabled"} {
				v, ok := Config(k)
				if !ok {
					v = "<absent>"
				}
				seen[name] = append(seen[name], k+"="+v)
			}
			seen[name] = append(seen[name], "running="+PolicyName())
			return Allow(), nil
		}}}
	}
	b := NewBundle(read("a"), read("b"))
	use(t, b, b.Reads())
	if resp := admitJSON(t, bundlePod); !resp.Allowed {
		t.Fatalf("response %+v", resp)
	}
	want := map[string][]string{
		"a": {"mode=a's own", "only=x", "disabled=<absent>", "running=a"},
		"b": {"mode=bundle-wide", "only=<absent>", "disabled=", "running=b"},
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("config seen %v, want %v", seen, want)
	}
	if v, _ := Config("mode"); v != "bundle-wide" || PolicyName() != "" {
		t.Errorf("outside the bundle: Config(mode) = %q, PolicyName() = %q", v, PolicyName())
	}
	if _, ok := Config("only"); ok {
		t.Error("outside the bundle a policy's key answers a plain one")
	}
}

func TestNewBundle_Invalid(t *testing.T) {
	ok := Policy{Name: "ok", Admitter: admitOnly{}}
	for _, tc := range []struct {
		name     string
		policies []Policy
		want     string
	}{
		{"none", nil, "no policies"},
		{"empty name", []Policy{{Admitter: admitOnly{}}}, "policy name"},
		{"dotted name", []Policy{{Name: "a.b", Admitter: admitOnly{}}}, "policy name"},
		{"twice", []Policy{ok, ok}, "given twice"},
		{"no admitter", []Policy{{Name: "x"}}, "no Admitter"},
		{"nested", []Policy{{Name: "x", Admitter: NewBundle(ok)}}, "is a bundle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), tc.want) {
					t.Errorf("recovered %v, want a panic containing %q", r, tc.want)
				}
			}()
			NewBundle(tc.policies...)
		})
	}
}

// checker is a bundle policy that allows every pod and checks its config:
// key must be set, else its error names the key. It records the value it
// read in *seen.
type checker struct {
	key  string
	seen *[]string
}

func (checker) Admit(AdmitRequest) (Verdict, error) { return Allow(), nil }

func (c checker) CheckConfig() error {
	v, ok := Config(c.key)
	*c.seen = append(*c.seen, PolicyName()+"="+v)
	if !ok {
		return errors.New("config " + c.key + " is not set")
	}
	return nil
}

// TestBundle_CheckConfig runs each checking policy's config check with its
// own keys, in order, and refuses with the first error prefixed with its
// policy's name; CheckConfig (the export's native runner) answers the same.
func TestBundle_CheckConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  map[string]string
		wantErr string
		seen    []string
	}{
		{"every policy's key set", map[string]string{"a.allowed": "x", "b.allowed": "y"}, "", []string{"a=x", "b=y"}},
		{"a bundle-wide default", map[string]string{"allowed": "d", "b.allowed": "y"}, "", []string{"a=d", "b=y"}},
		{"the second policy's key missing", map[string]string{"a.allowed": "x"}, "b: config allowed is not set", []string{"a=x", "b="}},
		{"the first policy's key missing", map[string]string{"b.allowed": "y"}, "a: config allowed is not set", []string{"a="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			var log []string
			b := NewBundle(
				Policy{Name: "a", Admitter: checker{key: "allowed", seen: &seen}},
				recorder("plain", &log, Allow(), nil, Reads(0), nil),
				Policy{Name: "b", Admitter: checker{key: "allowed", seen: &seen}},
			)
			use(t, b, b.Reads())
			prev := UseNativeHost(&NativeHost{Config: tt.config})
			t.Cleanup(func() { UseNativeHost(prev) })
			err := CheckConfig()
			if got := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && got != tt.wantErr) {
				t.Fatalf("CheckConfig() = %v, want %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(seen, tt.seen) {
				t.Errorf("the checks read %v, want %v (each policy its own keys, in order, none after a refusal)", seen, tt.seen)
			}
			if PolicyName() != "" {
				t.Errorf("PolicyName() = %q after the check, want none running", PolicyName())
			}
		})
	}
}

// TestCheckConfig covers the native runner on a plugin of its own: nil for
// a plugin that does not check, its error, and a panic as an error.
func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name    string
		plugin  any
		wantErr string
	}{
		{"no ConfigChecker", admitOnly{}, ""},
		{"refuses", refusing{err: errors.New("config allowed is not set")}, "config allowed is not set"},
		{"panics", refusing{panics: true}, "config check panicked: boom"},
		{"accepts", refusing{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			use(t, tt.plugin)
			err := CheckConfig()
			if (tt.wantErr == "") != (err == nil) || (err != nil && err.Error() != tt.wantErr) {
				t.Fatalf("CheckConfig() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// refusing is an admission plugin whose config check returns err or panics.
type refusing struct {
	err    error
	panics bool
}

func (refusing) Admit(AdmitRequest) (Verdict, error) { return Allow(), nil }

func (r refusing) CheckConfig() error {
	if r.panics {
		panic("boom")
	}
	return r.err
}
