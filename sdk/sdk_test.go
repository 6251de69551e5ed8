package sdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wasmlet/wasmlet/abi"
)

// testPlugin implements every kind; each method is set per test.
type testPlugin struct {
	admit func(AdmitRequest) (Verdict, error)
	poll  func(SourceRequest) (SourceResult, error)
	hook  func(HookRequest) (Adjustment, error)
}

func (p testPlugin) Admit(r AdmitRequest) (Verdict, error)      { return p.admit(r) }
func (p testPlugin) Poll(r SourceRequest) (SourceResult, error) { return p.poll(r) }
func (p testPlugin) Hook(r HookRequest) (Adjustment, error)     { return p.hook(r) }

type admitOnly struct{}

func (admitOnly) Admit(AdmitRequest) (Verdict, error) { return Allow(), nil }

// use registers p for the test and restores the previous registration.
func use(t *testing.T, p any, opts ...Option) {
	t.Helper()
	saved := registered
	registered.admitter, registered.source, registered.hook, registered.hooks = nil, nil, nil, pointHooks{}
	registered.checker = nil
	Register(p, opts...)
	t.Cleanup(func() { registered = saved })
}

func TestRegister_Reads(t *testing.T) {
	pod := `{"metadata":{"name":"p","namespace":"ns","labels":{"a":"b"},"annotations":{"c":"d"}},` +
		`"spec":{"hostPID":true,"volumes":[{"name":"v"}],"nodeSelector":{"k":"v"},"tolerations":[{"key":"t"}],` +
		`"containers":[{"name":"c","image":"i","command":["x"],"args":["y"],"workingDir":"/w",` +
		`"env":[{"name":"E","value":"1"}],"ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}},` +
		`"volumeMounts":[{"name":"v","mountPath":"/v"}],"securityContext":{"privileged":true}}]}}`
	full := func(t *testing.T) Pod {
		p, err := DecodePod([]byte(pod))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		opts  []Option
		parts Parts // the parts expected decoded
	}{
		{"no option", nil, AllParts},
		{"Reads(AllParts)", []Option{Reads(AllParts)}, AllParts},
		{"Reads(0)", []Option{Reads(0)}, 0},
		{"Reads(Resources)", []Option{Reads(Resources)}, Resources},
		{"Reads(Labels|Env)", []Option{Reads(Labels | Env)}, Labels | Env},
		{"Reads(Volumes|Scheduling|Commands|Ports|VolumeMounts)", []Option{Reads(Volumes | Scheduling | Commands | Ports | VolumeMounts)}, Volumes | Scheduling | Commands | Ports | VolumeMounts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Pod
			use(t, testPlugin{admit: func(r AdmitRequest) (Verdict, error) { got = r.Pod; return Allow(), nil }}, tc.opts...)
			if out := Handle(abi.KindAdmission, []byte(`{"pod":`+pod+`}`)); !strings.Contains(string(out), `"allowed":true`) {
				t.Fatalf("response %s", out)
			}
			want := full(t)
			c, wc := &want.Spec.Containers[0], &got.Spec.Containers[0]
			drop := func(p Parts, f func()) {
				if tc.parts&p == 0 {
					f()
				}
			}
			drop(Labels, func() { want.Labels, want.Annotations, want.OwnerReferences = nil, nil, nil })
			drop(Volumes, func() { want.Spec.Volumes = nil })
			drop(Scheduling, func() { want.Spec.NodeSelector, want.Spec.Tolerations = nil, nil })
			drop(Commands, func() { c.Command, c.Args, c.WorkingDir = nil, nil, "" })
			drop(Env, func() { c.Env = nil })
			drop(Ports, func() { c.Ports = nil })
			drop(Resources, func() { c.Resources = ResourceRequirements{} })
			drop(VolumeMounts, func() { c.VolumeMounts = nil })
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
			if wc.Name != "c" || wc.Image != "i" || !wc.SecurityContext.IsPrivileged() || !got.Spec.HostPID || got.Namespace != "ns" {
				t.Errorf("basic fields missing: %+v", got)
			}
			// A part left undecoded is still checked to be valid JSON.
			bad := strings.Replace(pod, `"value":"1"}`, `"value":"1"x}`, 1)
			if out := Handle(abi.KindAdmission, []byte(`{"pod":`+bad+`}`)); !strings.Contains(string(out), `"error"`) {
				t.Errorf("malformed env accepted: %s", out)
			}
		})
	}
}

// TestRegister_ReadsAdmitFields checks that Reads also says which admission
// request fields beyond the pod the plugin reads (what the wasmlet_reads
// export answers) and that reading one not named is an error, not an empty
// answer.
func TestRegister_ReadsAdmitFields(t *testing.T) {
	req := []byte(`{"pod":{"metadata":{"name":"p"}},"node":{"metadata":{"name":"n"}},"podsOnNode":[{"metadata":{"name":"q"}}]}`)
	for _, tc := range []struct {
		name string
		opts []Option
		want abi.Reads
	}{
		{"no option", nil, abi.ReadsAll},
		{"Reads(AllParts)", []Option{Reads(AllParts)}, abi.ReadsAll},
		{"Reads(0)", []Option{Reads(0)}, 0},
		{"Reads(Resources)", []Option{Reads(Resources)}, 0},
		{"Reads(AdmitNode)", []Option{Reads(AdmitNode)}, abi.ReadsNode},
		{"Reads(Labels|AdmitPodsOnNode)", []Option{Reads(Labels | AdmitPodsOnNode)}, abi.ReadsPodsOnNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodeErr, podsErr error
			var node Node
			var pods []Pod
			use(t, testPlugin{admit: func(r AdmitRequest) (Verdict, error) {
				node, _, nodeErr = r.Node()
				pods, podsErr = r.PodsOnNode()
				return Allow(), nil
			}}, tc.opts...)
			if got := reads(); got != tc.want {
				t.Fatalf("reads() = %b, want %b", got, tc.want)
			}
			if out := Handle(abi.KindAdmission, req); !strings.Contains(string(out), `"allowed":true`) {
				t.Fatalf("response %s", out)
			}
			if tc.want&abi.ReadsNode != 0 {
				if nodeErr != nil || node.Name != "n" {
					t.Errorf("Node() = %+v, %v; want node n", node, nodeErr)
				}
			} else if nodeErr == nil || !strings.Contains(nodeErr.Error(), "sdk.AdmitNode") {
				t.Errorf("Node() error = %v, want one naming sdk.AdmitNode", nodeErr)
			}
			if tc.want&abi.ReadsPodsOnNode != 0 {
				if podsErr != nil || len(pods) != 1 || pods[0].Name != "q" {
					t.Errorf("PodsOnNode() = %+v, %v; want pod q", pods, podsErr)
				}
			} else if podsErr == nil || !strings.Contains(podsErr.Error(), "sdk.AdmitPodsOnNode") {
				t.Errorf("PodsOnNode() error = %v, want one naming sdk.AdmitPodsOnNode", podsErr)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	use(t, admitOnly{})
	if got := Kinds(); !reflect.DeepEqual(got, []abi.Kind{abi.KindAdmission}) {
		t.Errorf("Kinds() = %v", got)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("second Register did not panic")
			}
		}()
		Register(admitOnly{})
	}()
	registered.admitter = nil
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "implements none") {
				t.Errorf("Register(42) recovered %v", r)
			}
		}()
		Register(42)
	}()
}

func TestHandle_Admit(t *testing.T) {
	var seen AdmitRequest
	use(t, testPlugin{admit: func(r AdmitRequest) (Verdict, error) {
		seen = r
		if r.Pod.Spec.HostNetwork {
			return Deny("HostNetwork", `pod "x" uses the host's network`), nil
		}
		if r.Pod.Name == "fail" {
			return Verdict{}, errors.New("cannot decide")
		}
		if r.Pod.Name == "panic" {
			panic("boom")
		}
		return Allow(), nil
	}})
	tests := []struct {
		name string
		in   string
		want abi.AdmitResponse
	}{
		{"allowed", `{"pod":{"metadata":{"name":"a"}}}`, abi.AdmitResponse{Allowed: true}},
		{"denied", `{"pod":{"spec":{"hostNetwork":true}}}`, abi.AdmitResponse{Reason: "HostNetwork", Message: `pod "x" uses the host's network`}},
		{"plugin error", `{"pod":{"metadata":{"name":"fail"}}}`, abi.AdmitResponse{Error: "cannot decide"}},
		{"plugin panic", `{"pod":{"metadata":{"name":"panic"}}}`, abi.AdmitResponse{Error: "plugin panicked: boom"}},
		{"malformed request", `{"pod":`, abi.AdmitResponse{Error: "admit request: json: offset 7: expected object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got abi.AdmitResponse
			if err := json.Unmarshal(Handle(abi.KindAdmission, []byte(tt.in)), &got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}

	// Node and pods on the node are decoded on demand.
	in := `{"pod":{},"node":{"metadata":{"name":"n1"}},"podsOnNode":[{"metadata":{"name":"p1"}},{"metadata":{"name":"p2"}}]}`
	Handle(abi.KindAdmission, []byte(in))
	node, ok, err := seen.Node()
	if err != nil || !ok || node.Name != "n1" {
		t.Errorf("Node() = %+v, %v, %v", node, ok, err)
	}
	pods, err := seen.PodsOnNode()
	if err != nil || len(pods) != 2 || pods[1].Name != "p2" {
		t.Errorf("PodsOnNode() = %+v, %v", pods, err)
	}
	Handle(abi.KindAdmission, []byte(`{"pod":{},"node":null}`))
	if _, ok, err := seen.Node(); ok || err != nil {
		t.Errorf("absent node: ok=%v err=%v", ok, err)
	}
	Handle(abi.KindAdmission, []byte(`{"pod":{},"podsOnNode":[{"spec":{"priority":"x"}}]}`))
	if _, err := seen.PodsOnNode(); err == nil || !strings.Contains(err.Error(), "podsOnNode") {
		t.Errorf("bad podsOnNode: %v", err)
	}
}

func TestHandle_Source(t *testing.T) {
	use(t, testPlugin{poll: func(r SourceRequest) (SourceResult, error) {
		switch r.Seq {
		case 1:
			return SourceResult{Updates: []PodUpdate{{Op: abi.OpSet, Pods: []json.RawMessage{[]byte(`{"metadata":{"name":"a"}}`), []byte(`{}`)}}}, NextPoll: 1500 * time.Millisecond}, nil
		case 2:
			return SourceResult{}, nil
		case 3:
			return SourceResult{Updates: []PodUpdate{{Op: abi.OpAdd, Pods: []json.RawMessage{[]byte(`{"metadata":`)}}}}, nil
		}
		return SourceResult{}, errors.New("upstream down")
	}})
	tests := []struct {
		seq  uint64
		want string
	}{
		{1, `{"updates":[{"op":"SET","pods":[{"metadata":{"name":"a"}},{}]}],"nextPollMillis":1500}`},
		{2, `{}`},
		{3, `{"error":"update 0: pod 0 is not valid JSON"}`},
		{4, `{"error":"upstream down"}`},
	}
	for _, tt := range tests {
		in, _ := json.Marshal(abi.SourceRequest{Seq: tt.seq})
		out := Handle(abi.KindSource, in)
		if string(out) != tt.want {
			t.Errorf("seq %d: got %s, want %s", tt.seq, out, tt.want)
		}
		var resp abi.SourceResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Errorf("seq %d: %v", tt.seq, err)
		}
	}
}

func TestHandle_Hook(t *testing.T) {
	var seen HookRequest
	use(t, testPlugin{hook: func(r HookRequest) (Adjustment, error) {
		seen = r
		if r.Point == abi.HookPreStop {
			return Adjustment{}, errors.New("not now")
		}
		return Adjustment{
			Env:         []EnvVar{{Name: "A", Value: "1"}},
			Labels:      map[string]string{"b": "2", "a": "1"},
			Annotations: map[string]string{"note": "x\"y"},
		}, nil
	}})
	in, _ := json.Marshal(abi.HookRequest{Point: abi.HookPreCreate, Pod: []byte(`{"metadata":{"name":"p"}}`), Container: []byte(`{"name":"c","image":"i"}`)})
	out := Handle(abi.KindHook, in)
	want := `{"adjustment":{"env":[{"name":"A","value":"1"}],"labels":{"a":"1","b":"2"},"annotations":{"note":"x\"y"}}}`
	if string(out) != want {
		t.Errorf("got %s\nwant %s", out, want)
	}
	if seen.Point != abi.HookPreCreate || seen.Pod.Name != "p" || seen.Container == nil || seen.Container.Image != "i" {
		t.Errorf("request decoded as %+v", seen)
	}
	in, _ = json.Marshal(abi.HookRequest{Point: abi.HookPreStop, Pod: []byte(`{}`)})
	if out := Handle(abi.KindHook, in); string(out) != `{"error":"not now"}` {
		t.Errorf("error: got %s", out)
	}
	if seen.Container != nil {
		t.Errorf("container at a pod point: %+v", seen.Container)
	}
}

func TestHandle_NotImplemented(t *testing.T) {
	use(t, admitOnly{})
	for _, k := range []abi.Kind{abi.KindSource, abi.KindHook} {
		if out := string(Handle(k, []byte(`{}`))); !strings.Contains(out, "does not implement "+string(k)) {
			t.Errorf("%s: %s", k, out)
		}
	}
}

func TestEncoder_Str(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" backslash\\ slash/", "ctl\x00\x01\x1f\t\n\r", "héllo 中文 😀", "bad\xff\xfeutf8", "\u2028\u2029", "<html>&"} {
		checkStrRoundTrip(t, s)
	}
}

// FuzzEncoder_Str checks that any string encodes to JSON that encoding/json
// reads back as the same string (invalid UTF-8 becoming U+FFFD).
func FuzzEncoder_Str(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00", "\xff", "😀", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(checkStrRoundTrip)
}

func checkStrRoundTrip(t *testing.T, s string) {
	e := encoder{}
	e.str(s)
	var got string
	if err := json.Unmarshal(e.b, &got); err != nil {
		t.Fatalf("%q encoded as %s: %v", s, e.b, err)
	}
	if want := replaceEachInvalid(s); got != want {
		t.Fatalf("%q round-trips to %q", s, got)
	}
}

// replaceEachInvalid replaces each byte of invalid UTF-8 with U+FFFD, as
// encoding/json does (strings.ToValidUTF8 replaces whole runs).
func replaceEachInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func TestEncodeHTTPRequest(t *testing.T) {
	req := HTTPRequest{Method: "POST", URL: "https://example.com/x?a=1", Headers: map[string]string{"X-B": "2", "X-A": "1"}, Body: []byte{0, 1, 2, 250}, TimeoutMillis: 500}
	var got HTTPRequest
	if err := json.Unmarshal(encodeHTTPRequest(req), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, req) {
		t.Errorf("got %+v, want %+v", got, req)
	}
}

func BenchmarkHandle_Admit(b *testing.B) {
	saved := registered
	registered.admitter, registered.source, registered.hook = admitOnly{}, nil, nil
	b.Cleanup(func() { registered = saved })
	pod := readPod4k(b)
	req, _ := json.Marshal(abi.AdmitRequest{Pod: pod})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Handle(abi.KindAdmission, append([]byte(nil), req...))
	}
}

func TestHookPoints(t *testing.T) {
	if !reflect.DeepEqual(HookPoints, abi.HookPoints) {
		t.Fatalf("HookPoints = %v, want abi's %v", HookPoints, abi.HookPoints)
	}
}
