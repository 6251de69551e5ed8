package abi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestPackResult(t *testing.T) {
	tests := []struct{ ptr, length uint32 }{{0, 0}, {1, 2}, {0xffffffff, 0xffffffff}, {65536, 17}, {0, 5}}
	for _, tt := range tests {
		packed := PackResult(tt.ptr, tt.length)
		if packed>>32 != uint64(tt.ptr) {
			t.Errorf("PackResult(%d, %d) = %#x: pointer not in the high 32 bits", tt.ptr, tt.length, packed)
		}
		p, l := UnpackResult(packed)
		if p != tt.ptr || l != tt.length {
			t.Errorf("UnpackResult(PackResult(%d, %d)) = %d, %d", tt.ptr, tt.length, p, l)
		}
	}
}

func FuzzUnpackResult(f *testing.F) {
	f.Add(uint64(0))
	f.Add(uint64(1) << 32)
	f.Add(^uint64(0))
	f.Fuzz(func(t *testing.T, packed uint64) {
		if p, l := UnpackResult(packed); PackResult(p, l) != packed {
			t.Fatalf("round trip of %#x lost bits", packed)
		}
	})
}

func TestExportForKind(t *testing.T) {
	want := map[Kind]string{KindSource: ExportSource, KindAdmission: ExportAdmit, KindHook: ExportHook, "other": ""}
	for k, e := range want {
		if got := ExportForKind(k); got != e {
			t.Errorf("ExportForKind(%q) = %q, want %q", k, got, e)
		}
	}
	for _, k := range Kinds {
		if ExportForKind(k) == "" {
			t.Errorf("kind %q in Kinds has no export", k)
		}
	}
}

func TestErrno_String(t *testing.T) {
	for e := ErrnoNoResult; e <= ErrnoNotFound; e++ {
		if s := e.String(); s == "" || s == "unknown errno" {
			t.Errorf("Errno(%d).String() = %q", e, s)
		}
	}
	if Errno(-99).String() != "unknown errno" {
		t.Error("unknown errno not reported as such")
	}
}

func TestManifest_Validate(t *testing.T) {
	valid := func() Manifest {
		return Manifest{Name: "deny-privileged", Version: "1.0.0", ABI: V1, Kinds: []Kind{KindAdmission}, SHA256: "ab"}
	}
	tests := []struct {
		name   string
		mutate func(*Manifest)
		errSub string // empty: valid
	}{
		{"valid", func(*Manifest) {}, ""},
		{"extism", func(m *Manifest) { m.ABI = Extism }, ""},
		{"bad name", func(m *Manifest) { m.Name = "Deny_Privileged" }, "name"},
		{"name too long", func(m *Manifest) { m.Name = strings.Repeat("a", 64) }, "name"},
		{"missing abi", func(m *Manifest) { m.ABI = "" }, "abi: missing"},
		{"unknown abi", func(m *Manifest) { m.ABI = "v9" }, "unsupported"},
		{"no kinds", func(m *Manifest) { m.Kinds = nil }, "kinds"},
		{"unknown kind", func(m *Manifest) { m.Kinds = []Kind{"mutation"} }, "unknown kind"},
		{"duplicate kind", func(m *Manifest) { m.Kinds = []Kind{KindHook, KindHook} }, "twice"},
		{"missing sha256", func(m *Manifest) { m.SHA256 = "" }, "sha256"},
		{"bad failure policy", func(m *Manifest) { m.FailurePolicy = "Maybe" }, "failurePolicy"},
		{"enforce", func(m *Manifest) { m.Mode = ModeEnforce }, ""},
		{"monitor", func(m *Manifest) { m.Mode = ModeMonitor }, ""},
		{"bad mode", func(m *Manifest) { m.Mode = "audit" }, `mode "audit": want enforce or monitor`},
		{"monitor hook", func(m *Manifest) { m.Mode, m.Kinds = ModeMonitor, []Kind{KindAdmission, KindHook} }, "only admission plugins can monitor"},
		{"monitor source", func(m *Manifest) { m.Mode, m.Kinds = ModeMonitor, []Kind{KindSource} }, "only admission plugins can monitor"},
		{"negative timeout", func(m *Manifest) { m.Permissions.Timeout.Duration = -time.Second }, "timeout"},
		{"hook points", func(m *Manifest) { m.Kinds, m.Points = []Kind{KindHook}, []HookPoint{HookPreCreate, HookValidate} }, ""},
		{"points without hook", func(m *Manifest) { m.Points = []HookPoint{HookValidate} }, "points: only hook plugins"},
		{"unknown point", func(m *Manifest) { m.Kinds, m.Points = []Kind{KindHook}, []HookPoint{"PostCreate"} }, `points: unknown point "PostCreate"`},
		{"duplicate point", func(m *Manifest) { m.Kinds, m.Points = []Kind{KindHook}, []HookPoint{HookPostStop, HookPostStop} }, `points: "PostStop" listed twice`},
		{"adjust", func(m *Manifest) {
			m.Permissions.Adjust, m.Permissions.HostPaths = []AdjustField{AdjustMounts, AdjustResources}, []string{"/srv/data"}
		}, ""},
		{"unknown adjust", func(m *Manifest) { m.Permissions.Adjust = []AdjustField{"rlimits"} }, `permissions.adjust: unknown field "rlimits"`},
		{"duplicate adjust", func(m *Manifest) { m.Permissions.Adjust = []AdjustField{AdjustEnv, AdjustEnv} }, `permissions.adjust: "env" listed twice`},
		{"relative host path", func(m *Manifest) {
			m.Permissions.Adjust, m.Permissions.HostPaths = []AdjustField{AdjustDevices}, []string{"dev"}
		}, `permissions.hostPaths[0] "dev"`},
		{"unclean host path", func(m *Manifest) {
			m.Permissions.Adjust, m.Permissions.HostPaths = []AdjustField{AdjustDevices}, []string{"/dev/../etc"}
		}, "absolute, clean"},
		{"host paths unused", func(m *Manifest) { m.Permissions.HostPaths = []string{"/dev"} }, "lists neither"},
		{"mounts without host paths", func(m *Manifest) { m.Permissions.Adjust = []AdjustField{AdjustMounts} }, "need permissions.hostPaths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid()
			tt.mutate(&m)
			err := m.Validate()
			if tt.errSub == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if m.Wasm != m.Name+".wasm" || m.FailurePolicy != FailurePolicyFail || m.Mode == "" {
					t.Fatalf("defaults not filled: wasm %q, failurePolicy %q, mode %q", m.Wasm, m.FailurePolicy, m.Mode)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errSub) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tt.errSub)
			}
		})
	}
}

func TestManifest_Validate_reference(t *testing.T) {
	valid := func() Manifest {
		return Manifest{Name: "image-allowlist", Image: "registry.example:5000/policies/image-allowlist:v1"}
	}
	digest := "@sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name   string
		mutate func(*Manifest)
		errSub string // empty: valid
	}{
		{"tag", func(*Manifest) {}, ""},
		{"digest", func(m *Manifest) { m.Image = "registry.example/policies/image-allowlist" + digest }, ""},
		{"tag and digest", func(m *Manifest) { m.Image += digest }, ""},
		{"grant and node settings", func(m *Manifest) {
			m.Permissions = Permissions{AllowedHosts: []string{"api.example.com"}, MemoryPages: 64, Timeout: Duration{time.Second}}
			m.Config, m.Order, m.FailurePolicy, m.Mode = map[string]string{"k": "v"}, 3, FailurePolicyIgnore, ModeMonitor
		}, ""},
		{"keys", func(m *Manifest) { m.Verification = &Verification{Keys: []string{"cosign.pub"}} }, ""},
		{"keyless", func(m *Manifest) {
			m.Verification = &Verification{TrustedRoot: "root.json", Keyless: []KeylessIdentity{{Issuer: "https://issuer", SubjectRegExp: "^ci@"}}}
		}, ""},
		{"no tag", func(m *Manifest) { m.Image = "registry.example:5000/policies/image-allowlist" }, "image"},
		{"no repository", func(m *Manifest) { m.Image = "image-allowlist:v1" }, "image"},
		{"short digest", func(m *Manifest) { m.Image = "registry.example/p@sha256:abc" }, "image"},
		{"space", func(m *Manifest) { m.Image = "registry.example/p:v 1" }, "image"},
		{"wasm too", func(m *Manifest) { m.Wasm = "x.wasm" }, "wasm: a manifest with image"},
		{"sha256 too", func(m *Manifest) { m.SHA256 = "ab" }, "sha256: a manifest with image"},
		{"abi too", func(m *Manifest) { m.ABI = V1 }, "abi: a manifest with image"},
		{"kinds too", func(m *Manifest) { m.Kinds = []Kind{KindAdmission} }, "kinds: a manifest with image"},
		{"version too", func(m *Manifest) { m.Version = "1.0.0" }, "version: a manifest with image"},
		{"points too", func(m *Manifest) { m.Points = []HookPoint{HookValidate} }, "points: a manifest with image"},
		{"adjust grant", func(m *Manifest) {
			m.Permissions.Adjust, m.Permissions.HostPaths = []AdjustField{AdjustDevices}, []string{"/dev"}
		}, ""},
		{"bad adjust grant", func(m *Manifest) { m.Permissions.Adjust = []AdjustField{"hooks"} }, "permissions.adjust"},
		{"bad failure policy", func(m *Manifest) { m.FailurePolicy = "Maybe" }, "failurePolicy"},
		{"bad mode", func(m *Manifest) { m.Mode = "audit" }, "mode"},
		{"negative timeout", func(m *Manifest) { m.Permissions.Timeout.Duration = -time.Second }, "permissions.timeout"},
		{"keyless without issuer", func(m *Manifest) {
			m.Verification = &Verification{TrustedRoot: "r.json", Keyless: []KeylessIdentity{{Subject: "a@b"}}}
		}, "verification.keyless[0].issuer"},
		{"keyless without subject", func(m *Manifest) {
			m.Verification = &Verification{TrustedRoot: "r.json", Keyless: []KeylessIdentity{{Issuer: "https://i"}}}
		}, "subject or subjectRegExp"},
		{"keyless bad regexp", func(m *Manifest) {
			m.Verification = &Verification{TrustedRoot: "r.json", Keyless: []KeylessIdentity{{Issuer: "https://i", SubjectRegExp: "("}}}
		}, "subjectRegExp"},
		{"keyless without trusted root", func(m *Manifest) {
			m.Verification = &Verification{Keyless: []KeylessIdentity{{Issuer: "https://i", Subject: "a@b"}}}
		}, "verification.trustedRoot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid()
			tt.mutate(&m)
			err := m.Validate()
			if tt.errSub == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if m.Wasm != "" || m.FailurePolicy == "" || m.Mode == "" {
					t.Fatalf("defaults: wasm %q (want none), failurePolicy %q, mode %q", m.Wasm, m.FailurePolicy, m.Mode)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errSub) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tt.errSub)
			}
		})
	}
	t.Run("verification without image", func(t *testing.T) {
		m := Manifest{Name: "p", Version: "1", ABI: V1, Kinds: []Kind{KindAdmission}, SHA256: "ab", Verification: &Verification{Keys: []string{"k.pub"}}}
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "verification") {
			t.Fatalf("Validate() = %v, want an error naming verification", err)
		}
	})
}

func TestManifest_CallsAt(t *testing.T) {
	tests := []struct {
		points []HookPoint
		at     HookPoint
		want   bool
	}{
		{nil, HookPreCreate, true},
		{nil, HookPodTerminated, true},
		{nil, HookValidate, false},
		{nil, HookPreUpdate, false},
		{nil, HookPostStop, false},
		{[]HookPoint{HookValidate}, HookValidate, true},
		{[]HookPoint{HookValidate}, HookPreCreate, false},
		{[]HookPoint{HookPostStop, HookPreCreate}, HookPreCreate, true},
	}
	for _, tt := range tests {
		m := Manifest{Points: tt.points}
		if got := m.CallsAt(tt.at); got != tt.want {
			t.Errorf("points %v: CallsAt(%s) = %v, want %v", tt.points, tt.at, got, tt.want)
		}
	}
}

func TestPermissions_MayAdjust(t *testing.T) {
	tests := []struct {
		adjust []AdjustField
		f      AdjustField
		want   bool
	}{
		{nil, AdjustEnv, true},
		{nil, AdjustLabels, true},
		{nil, AdjustAnnotations, true},
		{nil, AdjustMounts, false},
		{nil, AdjustRemove, false},
		{[]AdjustField{AdjustMounts}, AdjustMounts, true},
		{[]AdjustField{AdjustMounts}, AdjustEnv, false},
		{[]AdjustField{AdjustResources, AdjustRemove}, AdjustRemove, true},
	}
	for _, tt := range tests {
		p := Permissions{Adjust: tt.adjust}
		if got := p.MayAdjust(tt.f); got != tt.want {
			t.Errorf("adjust %v: MayAdjust(%s) = %v, want %v", tt.adjust, tt.f, got, tt.want)
		}
	}
}

func TestPermissions_HostPathAllowed(t *testing.T) {
	p := Permissions{HostPaths: []string{"/dev/fuse", "/srv/data"}}
	tests := []struct {
		path string
		want bool
	}{
		{"/dev/fuse", true},
		{"/srv/data", true},
		{"/srv/data/sub/file", true},
		{"/srv/database", false},
		{"/srv/data/../../etc", false},
		{"/dev/null", false},
		{"srv/data", false},
		{"/", false},
	}
	for _, tt := range tests {
		if got := p.HostPathAllowed(tt.path); got != tt.want {
			t.Errorf("HostPathAllowed(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if !(&Permissions{HostPaths: []string{"/"}}).HostPathAllowed("/etc") {
		t.Error(`prefix "/" does not cover /etc`)
	}
	if (&Permissions{}).HostPathAllowed("/dev/fuse") {
		t.Error("no prefixes allow a host path")
	}
}

func TestAdjustment_Fields(t *testing.T) {
	one := int64(1)
	tests := []struct {
		name string
		a    *Adjustment
		want []AdjustField
	}{
		{"nil", nil, nil},
		{"empty", &Adjustment{Resources: &Resources{}, Remove: &Removal{}}, nil},
		{"env labels", &Adjustment{Labels: map[string]string{"a": "b"}, Env: []EnvVar{{Name: "A"}}}, []AdjustField{AdjustEnv, AdjustLabels}},
		{"every new field", &Adjustment{
			Mounts: []Mount{{HostPath: "/a", ContainerPath: "/b"}}, Devices: []Device{{HostPath: "/dev/fuse"}},
			CDIDevices: []string{"vendor.com/gpu=0"}, Resources: &Resources{MemoryLimitBytes: &one}, OOMScoreAdj: &one,
			Sysctls: map[string]string{"net.ipv4.ip_forward": "1"}, Remove: &Removal{Mounts: []string{"/b"}},
		}, []AdjustField{AdjustMounts, AdjustDevices, AdjustCDIDevices, AdjustResources, AdjustOOMScoreAdj, AdjustSysctls, AdjustRemove}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a.Fields()
			if strings.Join(fieldStrings(got), ",") != strings.Join(fieldStrings(tt.want), ",") {
				t.Errorf("Fields() = %v, want %v", got, tt.want)
			}
		})
	}
}

func fieldStrings(fs []AdjustField) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

func TestVerification_Required(t *testing.T) {
	for _, tt := range []struct {
		v    *Verification
		want bool
	}{
		{nil, false},
		{&Verification{}, false},
		{&Verification{TrustedRoot: "r.json"}, false},
		{&Verification{Keys: []string{"k.pub"}}, true},
		{&Verification{Keyless: []KeylessIdentity{{Issuer: "i", Subject: "s"}}}, true},
	} {
		if got := tt.v.Required(); got != tt.want {
			t.Errorf("%+v.Required() = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestManifest_HasKind(t *testing.T) {
	m := Manifest{Kinds: []Kind{KindSource, KindHook}}
	if !m.HasKind(KindHook) || m.HasKind(KindAdmission) {
		t.Fatalf("HasKind wrong for %v", m.Kinds)
	}
}

func TestDuration_JSON(t *testing.T) {
	var p Permissions
	if err := json.Unmarshal([]byte(`{"timeout":"250ms"}`), &p); err != nil || p.Timeout.Duration != 250*time.Millisecond {
		t.Fatalf("Unmarshal = %v, %v", p.Timeout, err)
	}
	b, err := json.Marshal(p.Timeout)
	if err != nil || string(b) != `"250ms"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	for _, bad := range []string{`{"timeout":250}`, `{"timeout":"soon"}`} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

// TestMessages_JSON pins the wire names of ABI v1 messages (abi/v1/SPEC.md §3).
func TestMessages_JSON(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{AdmitResponse{Allowed: false, Reason: "Privileged", Message: "m"}, `{"allowed":false,"reason":"Privileged","message":"m"}`},
		{AdmitRequest{Pod: json.RawMessage(`{}`), PodsOnNode: []json.RawMessage{json.RawMessage(`{}`)}}, `{"pod":{},"podsOnNode":[{}]}`},
		{SourceRequest{Seq: 3}, `{"seq":3}`},
		{SourceResponse{Updates: []PodUpdate{{Op: OpSet, Pods: []json.RawMessage{}}}, NextPollMillis: 5}, `{"updates":[{"op":"SET","pods":[]}],"nextPollMillis":5}`},
		{HookRequest{Point: HookPreCreate, Pod: json.RawMessage(`{}`)}, `{"point":"PreCreate","pod":{}}`},
		{HookResponse{Adjustment: &Adjustment{Env: []EnvVar{{Name: "A", Value: "1"}}}}, `{"adjustment":{"env":[{"name":"A","value":"1"}]}}`},
		{HookRequest{Point: HookPostStop, Pod: json.RawMessage(`{}`), ExitCode: new(int32(0)), Reason: "Completed"}, `{"point":"PostStop","pod":{},"exitCode":0,"reason":"Completed"}`},
		{HookRequest{Point: HookPreUpdate, Pod: json.RawMessage(`{}`), Resources: &Resources{CPUQuota: new(int64(50000))}}, `{"point":"PreUpdate","pod":{},"resources":{"cpuQuota":50000}}`},
		{HookResponse{Refuse: "no"}, `{"refuse":"no"}`},
		{Adjustment{
			Mounts:    []Mount{{HostPath: "/srv", ContainerPath: "/data", ReadOnly: true, Propagation: PropagationHostToContainer}},
			Devices:   []Device{{HostPath: "/dev/fuse", Permissions: "rw"}},
			Resources: &Resources{MemoryLimitBytes: new(int64(1 << 20)), CpusetCPUs: "0", HugepageLimits: []HugepageLimit{{PageSize: "2MB", Limit: 4 << 20}}},
			Sysctls:   map[string]string{"kernel.shm_rmid_forced": "1"}, Remove: &Removal{Env: []string{"DEBUG"}},
		}, `{"mounts":[{"hostPath":"/srv","containerPath":"/data","readOnly":true,"propagation":"HostToContainer"}],"devices":[{"hostPath":"/dev/fuse","permissions":"rw"}],` +
			`"resources":{"cpusetCpus":"0","memoryLimitBytes":1048576,"hugepageLimits":[{"pageSize":"2MB","limit":4194304}]},"sysctls":{"kernel.shm_rmid_forced":"1"},"remove":{"env":["DEBUG"]}}`},
		{HTTPRequest{Method: "GET", URL: "http://x", Body: []byte("hi")}, `{"method":"GET","url":"http://x","body":"aGk="}`},
		{NodeInfo{Name: "n"}, `{"name":"n"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.v)
		if err != nil || string(b) != tt.want {
			t.Errorf("%T: %s, %v; want %s", tt.v, b, err, tt.want)
		}
	}
}

func TestAdmitRequest_AppendJSON(t *testing.T) {
	pod := json.RawMessage(`{"metadata":{"name":"p"}}`)
	node := json.RawMessage(`{"metadata":{"name":"n"}}`)
	cases := []struct {
		name string
		req  AdmitRequest
	}{
		{"pod only", AdmitRequest{Pod: pod}},
		{"no pod", AdmitRequest{}},
		{"pod and node", AdmitRequest{Pod: pod, Node: node}},
		{"pods on node", AdmitRequest{Pod: pod, PodsOnNode: []json.RawMessage{pod, node}}},
		{"everything", AdmitRequest{Pod: pod, Node: node, PodsOnNode: []json.RawMessage{node}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.req.AppendJSON(nil)
			want, err := json.Marshal(&tc.req)
			if err != nil {
				t.Fatal(err)
			}
			// encoding/json writes a nil RawMessage field that is not omitempty as null.
			if string(got) != string(want) {
				t.Fatalf("AppendJSON = %s\njson.Marshal = %s", got, want)
			}
		})
	}
}

func TestAdmitRequest_Omit(t *testing.T) {
	full := &AdmitRequest{Pod: []byte(`{"a":1}`), Node: []byte(`{"n":1}`), PodsOnNode: []json.RawMessage{[]byte(`{"p":1}`)}}
	tests := []struct {
		reads Reads
		want  string
	}{
		{ReadsAll, `{"pod":{"a":1},"node":{"n":1},"podsOnNode":[{"p":1}]}`},
		{ReadsAll | 1<<7, `{"pod":{"a":1},"node":{"n":1},"podsOnNode":[{"p":1}]}`},
		{ReadsNode, `{"pod":{"a":1},"node":{"n":1}}`},
		{ReadsPodsOnNode, `{"pod":{"a":1},"podsOnNode":[{"p":1}]}`},
		{0, `{"pod":{"a":1}}`},
	}
	for _, tt := range tests {
		if got := string(full.Omit(tt.reads).AppendJSON(nil)); got != tt.want {
			t.Errorf("Omit(%b) = %s, want %s", tt.reads, got, tt.want)
		}
	}
	if full.Omit(ReadsAll) != full || len(full.PodsOnNode) != 1 || full.Node == nil {
		t.Error("Omit changed the request or copied it needlessly")
	}
}
