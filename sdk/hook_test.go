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

// pointPlugin implements Hook and the point interfaces, each set per test
// (a nil one answers nothing).
type pointPlugin struct {
	calls *[]string
	err   error
}

func (p pointPlugin) record(what string, req HookRequest) error {
	*p.calls = append(*p.calls, what+" "+string(req.Point))
	return p.err
}

func (p pointPlugin) Hook(req HookRequest) (Adjustment, error) {
	return Adjustment{}, p.record("Hook", req)
}
func (p pointPlugin) Validate(req HookRequest) error  { return p.record("Validate", req) }
func (p pointPlugin) PostStop(req HookRequest) error  { return p.record("PostStop", req) }
func (p pointPlugin) PreUpdate(req HookRequest) error { return p.record("PreUpdate", req) }

// validateOnly implements only Validator.
type validateOnly struct{}

func (validateOnly) Validate(HookRequest) error { return Refuse("no") }

func TestRegister_Points(t *testing.T) {
	tests := []struct {
		name  string
		p     any
		want  []HookPoint
		kinds []abi.Kind
	}{
		{"Hook only", testPlugin{}, DefaultHookPoints, []abi.Kind{abi.KindSource, abi.KindAdmission, abi.KindHook}},
		{"Validator only", validateOnly{}, []HookPoint{HookValidate}, []abi.Kind{abi.KindHook}},
		{"Hook and every point interface", pointPlugin{}, HookPoints, []abi.Kind{abi.KindHook}},
		{"no hook", admitOnly{}, nil, []abi.Kind{abi.KindAdmission}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			use(t, tt.p)
			if got := Points(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Points() = %v, want %v", got, tt.want)
			}
			if got := Kinds(); !reflect.DeepEqual(got, tt.kinds) {
				t.Errorf("Kinds() = %v, want %v", got, tt.kinds)
			}
		})
	}
}

func TestHandle_HookPoints(t *testing.T) {
	var calls []string
	use(t, pointPlugin{calls: &calls})
	for _, pt := range HookPoints {
		in, _ := json.Marshal(abi.HookRequest{Point: pt, Pod: []byte(`{}`)})
		if out := string(Handle(abi.KindHook, in)); out != `{}` {
			t.Errorf("%s: response %s, want {}", pt, out)
		}
	}
	want := []string{"Hook PreSandbox", "Hook PreCreate", "Validate Validate", "Hook PostStart", "PreUpdate PreUpdate", "Hook PreStop", "PostStop PostStop", "Hook PodTerminated"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("calls = %q\nwant %q", calls, want)
	}

	// A Validator without Hook answers nothing at the other points.
	use(t, validateOnly{})
	in, _ := json.Marshal(abi.HookRequest{Point: HookPreCreate, Pod: []byte(`{}`)})
	if out := string(Handle(abi.KindHook, in)); out != `{}` {
		t.Errorf("PreCreate on a Validator: %s, want {}", out)
	}
}

func TestHandle_Refuse(t *testing.T) {
	tests := []struct {
		name  string
		point HookPoint
		err   error
		want  abi.HookResponse
	}{
		{"refusal at Validate", HookValidate, Refuse(`mount "/etc" is not allowed`), abi.HookResponse{Refuse: `mount "/etc" is not allowed`}},
		{"wrapped refusal", HookValidate, fmt.Errorf("policy: %w", Refuse("no")), abi.HookResponse{Refuse: "no"}},
		{"refusal elsewhere is an error", HookPreCreate, Refuse("no"), abi.HookResponse{Error: "no"}},
		{"error at Validate", HookValidate, errors.New("broken config"), abi.HookResponse{Error: "broken config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			use(t, pointPlugin{calls: &calls, err: tt.err})
			in, _ := json.Marshal(abi.HookRequest{Point: tt.point, Pod: []byte(`{}`)})
			var got abi.HookResponse
			if err := json.Unmarshal(Handle(abi.KindHook, in), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("response %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAdjustment_Helpers(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		name  string
		build func(a *Adjustment)
		want  abi.Adjustment
	}{
		{"env replaces same name", func(a *Adjustment) { a.AddEnv("A", "1").AddEnv("B", "2").AddEnv("A", "3") },
			abi.Adjustment{Env: []EnvVar{{Name: "A", Value: "3"}, {Name: "B", Value: "2"}}}},
		{"labels and annotations", func(a *Adjustment) { a.SetLabel("l", "1").SetAnnotation("n", "2") },
			abi.Adjustment{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"n": "2"}}},
		{"mount replaces same container path", func(a *Adjustment) {
			a.AddMount(Mount{HostPath: "/a", ContainerPath: "/x"}).AddMount(Mount{HostPath: "/b", ContainerPath: "/x", ReadOnly: true})
		}, abi.Adjustment{Mounts: []Mount{{HostPath: "/b", ContainerPath: "/x", ReadOnly: true}}}},
		{"device at its host path when no container path", func(a *Adjustment) {
			a.AddDevice(Device{HostPath: "/dev/fuse"}).AddDevice(Device{HostPath: "/dev/x", ContainerPath: "/dev/fuse", Permissions: "r"})
		}, abi.Adjustment{Devices: []Device{{HostPath: "/dev/x", ContainerPath: "/dev/fuse", Permissions: "r"}}}},
		{"CDI device once", func(a *Adjustment) { a.AddCDIDevice("v.com/gpu=0").AddCDIDevice("v.com/gpu=0") },
			abi.Adjustment{CDIDevices: []string{"v.com/gpu=0"}}},
		{"resources", func(a *Adjustment) {
			a.SetMemoryLimit(64<<20).SetCPUShares(512).SetCPUSet("0-1", "").SetHugepageLimit("2MB", 4<<20).SetHugepageLimit("2MB", 8<<20)
		}, abi.Adjustment{Resources: &LinuxResources{MemoryLimitBytes: i64(64 << 20), CPUShares: i64(512), CpusetCPUs: "0-1",
			HugepageLimits: []HugepageLimit{{PageSize: "2MB", Limit: 8 << 20}}}}},
		{"SetCPU as the kubelet's quota", func(a *Adjustment) { a.SetCPU(250) },
			abi.Adjustment{Resources: &LinuxResources{CPUQuota: i64(25000), CPUPeriod: i64(100000)}}},
		{"SetCPU's minimum quota", func(a *Adjustment) { a.SetCPU(1) },
			abi.Adjustment{Resources: &LinuxResources{CPUQuota: i64(1000), CPUPeriod: i64(100000)}}},
		{"OOM score and sysctls", func(a *Adjustment) { a.SetOOMScoreAdj(-500).SetSysctl("net.core.somaxconn", "1024") },
			abi.Adjustment{OOMScoreAdj: i64(-500), Sysctls: map[string]string{"net.core.somaxconn": "1024"}}},
		{"removals", func(a *Adjustment) { a.RemoveEnv("A", "B").RemoveMount("/data").RemoveAnnotation("x") },
			abi.Adjustment{Remove: &Removal{Env: []string{"A", "B"}, Mounts: []string{"/data"}, Annotations: []string{"x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Adjustment
			tt.build(&a)
			if got := abi.Adjustment(a); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
			if a.Empty() {
				t.Errorf("Empty() on %+v", a)
			}
		})
	}
	var zero Adjustment
	zero.Resources = &LinuxResources{}
	if !zero.Empty() {
		t.Errorf("an adjustment of empty resources is not Empty: %v", zero.Fields())
	}
}

// TestEncodeHookResult checks the encoder against encoding/json: every field
// of an adjustment, each alone and all together, reads back equal.
func TestEncodeHookResult(t *testing.T) {
	var all Adjustment
	all.AddEnv("A", "1\"").SetLabel("b", "2").SetLabel("a", "1").SetAnnotation("n", "x").
		AddMount(Mount{HostPath: "/srv/data", ContainerPath: "/data", ReadOnly: true, Propagation: PropagationHostToContainer}).
		AddMount(Mount{HostPath: "/mnt", ContainerPath: "/mnt"}).
		AddDevice(Device{HostPath: "/dev/fuse"}).AddDevice(Device{HostPath: "/dev/a", ContainerPath: "/dev/b", Permissions: "rw"}).
		AddCDIDevice("vendor.com/gpu=1").SetMemoryLimit(1<<30).SetCPU(1500).SetCPUShares(2).SetCPUSet("0", "0").
		SetHugepageLimit("1GB", 1<<62).SetOOMScoreAdj(0).SetSysctl("kernel.shm_rmid_forced", "1").
		RemoveEnv("X").RemoveMount("/old").RemoveAnnotation("gone")
	cases := []Adjustment{{}, all, {Remove: &Removal{}}, {Resources: &LinuxResources{CpusetMems: "1"}}}
	for _, f := range all.Fields() {
		one := Adjustment{}
		src, dst := reflect.ValueOf(all), reflect.ValueOf(&one).Elem()
		for i := 0; i < src.NumField(); i++ {
			name, _, _ := strings.Cut(src.Type().Field(i).Tag.Get("json"), ",")
			if name == string(f) {
				dst.Field(i).Set(src.Field(i))
			}
		}
		cases = append(cases, one)
	}
	for i, a := range cases {
		out := encodeHookResult(HookPreCreate, a, nil)
		var got abi.HookResponse
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("case %d: %s: %v", i, out, err)
		}
		want := abi.HookResponse{}
		if !a.Empty() {
			aa := abi.Adjustment(a)
			want.Adjustment = &aa
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("case %d: %s reads back as %+v, want %+v", i, out, got, want)
		}
		if want.Adjustment != nil {
			std, _ := json.Marshal(want)
			if string(std) != string(out) {
				t.Errorf("case %d:\n got %s\nwant %s (encoding/json)", i, out, std)
			}
		}
	}
}

func TestDecodeHookRequest(t *testing.T) {
	in := `{"point":"PostStop","pod":{"metadata":{"name":"p"}},"container":{"name":"c"},"exitCode":137,"reason":"OOMKilled",` +
		`"resources":{"memoryLimitBytes":1024,"hugepageLimits":[{"pageSize":"2MB","limit":2097152}]},` +
		`"config":{"image":"i","mounts":[{"hostPath":"/h","containerPath":"/c","readOnly":true}],"owners":{"mounts:/c":"x"}}}`
	got, err := DecodeHookRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case got.Point != HookPostStop || got.Pod.Name != "p" || got.Container == nil || got.Container.Name != "c":
		t.Errorf("point, pod, container: %+v", got)
	case got.ExitCode == nil || *got.ExitCode != 137 || got.Reason != "OOMKilled":
		t.Errorf("exit code and reason: %v %q", got.ExitCode, got.Reason)
	case got.Resources == nil || *got.Resources.MemoryLimitBytes != 1024 || got.Resources.HugepageLimits[0].Limit != 2<<20:
		t.Errorf("resources: %+v", got.Resources)
	case got.Config == nil || got.Config.Mounts[0] != (Mount{HostPath: "/h", ContainerPath: "/c", ReadOnly: true}) || got.Config.Owners["mounts:/c"] != "x":
		t.Errorf("config: %+v", got.Config)
	}
	for _, bad := range []struct{ in, want string }{
		{`{"exitCode":"1"}`, "into an integer"},
		{`{"exitCode":4294967296}`, "into int32"},
		{`{"config":{"mounts":[{"readOnly":"yes"}]}}`, "into a bool"},
		{`{"resources":{"hugepageLimits":[{"limit":-1}]}}`, "unsigned integer"},
		{`{"config":[]}`, "expected object"},
	} {
		if _, err := DecodeHookRequest([]byte(bad.in)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one containing %q", bad.in, err, bad.want)
		}
	}
}
