// Package sdkdecode checks the Go SDK's pod decoder (sdk.DecodePod,
// sdk.DecodeNode) against Kubernetes' own JSON decoding, sigs.k8s.io/json as
// the apiserver uses it: both accept with equal values, or both reject. It
// is in wasmlet's root module so that the SDK's module requires nothing of
// Kubernetes; the SDK's own tests cover what needs no reference.
package sdkdecode

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	k8sjson "sigs.k8s.io/json"

	"github.com/wasmlet/wasmlet/sdk"
)

// quantities stands for sdk.ResourceList in the reference's types: its
// UnmarshalJSON lets the reference decoder read quantities written as
// numbers, as the SDK's decoder does.
type quantities map[string]string

// UnmarshalJSON reads a resource list whose quantities are strings or
// numbers (kept as written).
func (r *quantities) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if *r == nil {
		*r = quantities{}
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

var resourceList = reflect.TypeFor[sdk.ResourceList]()

// reference decodes data into v (*sdk.Pod or *sdk.Node) like the Kubernetes
// apiserver does: into a copy of v's type whose sdk.ResourceLists are
// quantities, then copied over.
func reference(data []byte, v any) error {
	dst := reflect.ValueOf(v).Elem()
	mirror := reflect.New(mirrorOf(dst.Type()))
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(data, mirror.Interface()); err != nil {
		return err
	}
	copyValue(dst, mirror.Elem())
	return nil
}

// mirrorOf is t with every sdk.ResourceList in it replaced by quantities.
// An embedded struct field becomes a named one: every embedded field of the
// SDK's types has a JSON name (ObjectMeta is "metadata").
func mirrorOf(t reflect.Type) reflect.Type {
	switch {
	case t == resourceList:
		return reflect.TypeFor[quantities]()
	case t.Kind() == reflect.Pointer:
		return reflect.PointerTo(mirrorOf(t.Elem()))
	case t.Kind() == reflect.Slice:
		return reflect.SliceOf(mirrorOf(t.Elem()))
	case t.Kind() == reflect.Map:
		return reflect.MapOf(t.Key(), mirrorOf(t.Elem()))
	case t.Kind() == reflect.Struct:
		fields := make([]reflect.StructField, t.NumField())
		for i := range fields {
			f := t.Field(i)
			if f.Anonymous && f.Tag.Get("json") == "" {
				panic("sdkdecode: " + t.String() + " embeds " + f.Name + " without a JSON name")
			}
			fields[i] = reflect.StructField{Name: f.Name, Type: mirrorOf(f.Type), Tag: f.Tag}
		}
		return reflect.StructOf(fields)
	}
	return t
}

// copyValue sets dst to src, a value of mirrorOf(dst's type), keeping nil
// and empty slices and maps apart.
func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		for i := range src.NumField() {
			copyValue(dst.Field(i), src.Field(i))
		}
	case reflect.Pointer:
		if !src.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
			copyValue(dst.Elem(), src.Elem())
		}
	case reflect.Slice:
		if !src.IsNil() {
			dst.Set(reflect.MakeSlice(dst.Type(), src.Len(), src.Len()))
			for i := range src.Len() {
				copyValue(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Map:
		if !src.IsNil() {
			dst.Set(reflect.MakeMapWithSize(dst.Type(), src.Len()))
			for it := src.MapRange(); it.Next(); {
				elem := reflect.New(dst.Type().Elem()).Elem()
				copyValue(elem, it.Value())
				dst.SetMapIndex(it.Key(), elem)
			}
		}
	default:
		dst.Set(src.Convert(dst.Type()))
	}
}

func readPod4k(tb testing.TB) []byte {
	b, err := os.ReadFile("../../testdata/pod4k.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDecodePod_Pod4k(t *testing.T) {
	data := readPod4k(t)
	got, err := sdk.DecodePod(data)
	if err != nil {
		t.Fatal(err)
	}
	var want sdk.Pod
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
		name string
		in   string
	}{
		{"empty object", `{}`},
		{"null", `null`},
		{"whitespace", " \t\n{ \"metadata\" : { \"name\" : \"a\" } } \r\n"},
		{"escapes", `{"metadata":{"name":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2d"}}`},
		{"surrogate pair", `{"metadata":{"name":"\ud83d\ude00"}}`},
		{"lone surrogate", `{"metadata":{"name":"\ud83dx"}}`},
		{"high then bad low", `{"metadata":{"name":"\ud83d\u0041"}}`},
		{"invalid utf8", "{\"metadata\":{\"name\":\"a\xffb\xc3\"}}"},
		{"utf8 passthrough", `{"metadata":{"name":"héllo wörld 中文"}}`},
		{"escaped key", `{"metadata":{"n\u0061me":"x"}}`},
		{"case-sensitive keys", `{"Metadata":{"Name":"x"},"metadata":{"NAME":"y"}}`},
		{"null scalar keeps value", `{"metadata":{"name":"a","name":null}}`},
		{"null pointer resets", `{"spec":{"priority":5,"priority":null}}`},
		{"duplicate maps merge", `{"metadata":{"labels":{"a":"1"},"labels":{"b":"2"}}}`},
		{"null map", `{"metadata":{"labels":{"a":"1"},"labels":null}}`},
		{"empty slices stay non-nil", `{"spec":{"containers":[],"volumes":[]}}`},
		{"null slice", `{"spec":{"containers":null}}`},
		{"duplicate slices reuse elements", `{"spec":{"containers":[{"name":"a","image":"i"}],"containers":[{"name":"b"}]}}`},
		{"quantities as numbers", `{"spec":{"containers":[{"resources":{"limits":{"cpu":2,"memory":1.5e9}}}]}}`},
		{"negative ints", `{"spec":{"securityContext":{"runAsUser":-1,"supplementalGroups":[0,-5]}}}`},
		{"unknown fields of every type", `{"x":[1,-2.5e+3,true,false,null,{"y":{"z":[]}},"s\n"],"metadata":{"name":"n"}}`},
		{"hostPath", `{"spec":{"volumes":[{"name":"v","hostPath":{"path":"/var","type":"Directory"}}]}}`},
		{"ephemeral", `{"spec":{"ephemeralContainers":[{"name":"d","targetContainerName":"x","securityContext":{"privileged":true}}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sdk.DecodePod([]byte(tt.in))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			var want sdk.Pod
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
	got, err := sdk.DecodeNode(in)
	if err != nil {
		t.Fatal(err)
	}
	var want sdk.Node
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
		got, err := sdk.DecodePod(data)
		var want sdk.Pod
		werr := reference(data, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("input %q: sdk error %v, reference error %v", data, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("input %q: differs\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// hookFields are the fields of an abi.HookRequest, as the reference decodes
// them.
type hookFields struct {
	Point     sdk.HookPoint        `json:"point"`
	Pod       sdk.Pod              `json:"pod"`
	Container *sdk.Container       `json:"container"`
	Config    *sdk.ContainerConfig `json:"config"`
	Resources *sdk.LinuxResources  `json:"resources"`
	ExitCode  *int32               `json:"exitCode"`
	Reason    string               `json:"reason"`
}

// checkHookRequest decodes data with sdk.DecodeHookRequest and the
// reference: both reject it, or both accept it with equal fields.
func checkHookRequest(t *testing.T, data []byte) {
	t.Helper()
	got, err := sdk.DecodeHookRequest(data)
	var want hookFields
	werr := reference(data, &want)
	if (err == nil) != (werr == nil) {
		t.Fatalf("input %q: sdk error %v, reference error %v", data, err, werr)
	}
	if err != nil {
		return
	}
	have := hookFields{Point: got.Point, Pod: got.Pod, Container: got.Container, Config: got.Config, Resources: got.Resources, ExitCode: got.ExitCode, Reason: got.Reason}
	if !reflect.DeepEqual(have, want) {
		t.Fatalf("input %q: differs\n got %#v\nwant %#v", data, have, want)
	}
}

// hookCases are hook requests with the fields of the later points: a
// Validate request's config, a PreUpdate request's resources, a PostStop
// request's exit code and reason.
var hookCases = []string{
	`{"point":"PreCreate","pod":{"metadata":{"name":"p"}},"container":{"name":"c","image":"i"}}`,
	`{"point":"PostStop","pod":{},"exitCode":137,"reason":"OOMKilled"}`,
	`{"point":"PostStop","exitCode":null,"reason":null}`,
	`{"point":"PostStop","exitCode":-1,"exitCode":2}`,
	`{"point":"PreUpdate","resources":{"cpuShares":512,"cpuQuota":50000,"cpuPeriod":100000,"cpusetCpus":"0-1","cpusetMems":"0","memoryLimitBytes":67108864,"hugepageLimits":[{"pageSize":"2MB","limit":4194304},{"pageSize":"1GB","limit":18446744073709551615}]}}`,
	`{"point":"PreUpdate","resources":{"memoryLimitBytes":null,"hugepageLimits":null}}`,
	`{"point":"PreUpdate","resources":{"hugepageLimits":[]},"resources":null}`,
	`{"point":"Validate","config":{"image":"nginx","env":[{"name":"A","value":"1"}],"labels":{"l":"v"},"annotations":{"a":"b"},` +
		`"mounts":[{"hostPath":"/srv","containerPath":"/data","readOnly":true,"propagation":"HostToContainer"},{"hostPath":"/x","containerPath":"/y"}],` +
		`"devices":[{"hostPath":"/dev/fuse","containerPath":"/dev/fuse","permissions":"rwm"}],"cdiDevices":["v.com/gpu=0"],` +
		`"resources":{"memoryLimitBytes":1},"oomScoreAdj":-998,"owners":{"mounts:/y":"injector","resources:memoryLimitBytes":"adjuster"},"x":[1,{"y":null}]}}`,
	`{"point":"Validate","config":{"mounts":[],"devices":[],"cdiDevices":[],"env":[]}}`,
	`{"point":"Validate","config":{"mounts":[{"hostPath":"/a"}],"mounts":[{"containerPath":"/b"}]}}`,
	`{"point":"Validate","config":{"oomScoreAdj":5,"oomScoreAdj":null,"labels":{"a":"1"},"labels":{"b":"2"}}}`,
	`{"point":"Validate","config":null}`,
}

func TestDecodeHookRequest_Cases(t *testing.T) {
	for _, in := range hookCases {
		checkHookRequest(t, []byte(in))
	}
	for _, bad := range []string{
		`{"exitCode":1.5}`, `{"exitCode":"1"}`, `{"config":{"mounts":{}}}`, `{"config":{"mounts":[{"readOnly":1}]}}`,
		`{"resources":{"hugepageLimits":[{"limit":-1}]}}`, `{"resources":{"cpuShares":9223372036854775808}}`,
		`{"config":{"owners":{"a":1}}}`, `{"reason":5}`, `{"pod":5}`, `{"container":[]}`,
	} {
		checkHookRequest(t, []byte(bad))
	}
}

// FuzzDecodeHookRequest checks the hook request's fields against the
// reference on any input: both reject, or both accept with equal values.
func FuzzDecodeHookRequest(f *testing.F) {
	for _, s := range hookCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkHookRequest(t, data)
	})
}
