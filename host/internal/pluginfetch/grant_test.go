package pluginfetch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestEffective(t *testing.T) {
	d := Defaults{MemoryPages: 2048, Timeout: time.Second}
	art := func(p abi.Permissions) abi.Manifest {
		return abi.Manifest{Name: "artifact-name", Version: "1", ABI: abi.V1, Kinds: []abi.Kind{abi.KindAdmission}, SHA256: "ab", Permissions: p}
	}
	ms := func(v int) abi.Duration { return abi.Duration{Duration: time.Duration(v) * time.Millisecond} }
	tests := []struct {
		name       string
		grant, ask abi.Permissions
		want       abi.Permissions
		errSub     string
	}{
		{name: "nothing asked, nothing granted", want: abi.Permissions{}},
		{name: "unset request runs at the grant", grant: abi.Permissions{MemoryPages: 64, Timeout: ms(50)}, want: abi.Permissions{MemoryPages: 64, Timeout: ms(50)}},
		{name: "request within the grant", grant: abi.Permissions{AllowedHosts: []string{"*.example.com", "db:5432"}, MemoryPages: 64, Timeout: ms(50)},
			ask:  abi.Permissions{AllowedHosts: []string{"api.example.com", "*.eu.example.com", "db:5432"}, MemoryPages: 32, Timeout: ms(20)},
			want: abi.Permissions{AllowedHosts: []string{"api.example.com", "*.eu.example.com", "db:5432"}, MemoryPages: 32, Timeout: ms(20)}},
		{name: "request within the host default", ask: abi.Permissions{MemoryPages: 100, Timeout: ms(500)}, want: abi.Permissions{MemoryPages: 100, Timeout: ms(500)}},
		{name: "host not granted", grant: abi.Permissions{AllowedHosts: []string{"*.example.com"}}, ask: abi.Permissions{AllowedHosts: []string{"example.com"}}, errSub: `permissions.allowedHosts: the artifact asks for "example.com"`},
		{name: "no network granted", ask: abi.Permissions{AllowedHosts: []string{"a.example"}}, errSub: "permissions.allowedHosts"},
		{name: "wildcard beyond the grant", grant: abi.Permissions{AllowedHosts: []string{"api.example.com"}}, ask: abi.Permissions{AllowedHosts: []string{"*.example.com"}}, errSub: "permissions.allowedHosts"},
		{name: "memory beyond the grant", grant: abi.Permissions{MemoryPages: 64}, ask: abi.Permissions{MemoryPages: 65}, errSub: "permissions.memoryPages: the artifact asks for 65 pages, the grant is 64"},
		{name: "unset memory beyond the grant", grant: abi.Permissions{MemoryPages: 64}, want: abi.Permissions{MemoryPages: 64}},
		{name: "memory beyond the host default", ask: abi.Permissions{MemoryPages: 4096}, errSub: "permissions.memoryPages"},
		{name: "timeout beyond the grant", grant: abi.Permissions{Timeout: ms(100)}, ask: abi.Permissions{Timeout: ms(101)}, errSub: "permissions.timeout"},
		{name: "timeout beyond the host default", ask: abi.Permissions{Timeout: ms(1500)}, errSub: "permissions.timeout"},
		{name: "default adjust within the default grant", ask: abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustEnv, abi.AdjustAnnotations}},
			want: abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustEnv, abi.AdjustAnnotations}}},
		{name: "adjust beyond the default grant", ask: abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustResources}},
			errSub: `permissions.adjust: the artifact asks for "resources", which the grant [env labels annotations] does not cover`},
		{name: "adjust and host paths within the grant",
			grant: abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustMounts, abi.AdjustDevices, abi.AdjustResources}, HostPaths: []string{"/dev", "/srv"}},
			ask:   abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustDevices}, HostPaths: []string{"/dev/fuse"}},
			want:  abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustDevices}, HostPaths: []string{"/dev/fuse"}}},
		{name: "host path beyond the grant",
			grant:  abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustMounts}, HostPaths: []string{"/srv/data"}},
			ask:    abi.Permissions{Adjust: []abi.AdjustField{abi.AdjustMounts}, HostPaths: []string{"/srv"}},
			errSub: `permissions.hostPaths: the artifact asks for "/srv", which the grant [/srv/data] does not cover`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := abi.Manifest{Name: "node-name", Image: "r.example/p:v1", Order: 3, Config: map[string]string{"a": "b"}, Permissions: tt.grant}
			if err := ref.Validate(); err != nil {
				t.Fatal(err)
			}
			eff, err := effective(ref, art(tt.ask), d)
			if tt.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errSub) {
					t.Fatalf("effective = %v, want an error mentioning %q", err, tt.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if eff.Name != "node-name" || eff.Order != 3 || eff.Config["a"] != "b" || eff.Version != "1" || eff.Image != "" {
				t.Fatalf("effective = %+v", eff)
			}
			if strings.Join(eff.Permissions.AllowedHosts, ",") != strings.Join(tt.want.AllowedHosts, ",") ||
				eff.Permissions.MemoryPages != tt.want.MemoryPages || eff.Permissions.Timeout != tt.want.Timeout ||
				fmt.Sprint(eff.Permissions.Adjust) != fmt.Sprint(tt.want.Adjust) || fmt.Sprint(eff.Permissions.HostPaths) != fmt.Sprint(tt.want.HostPaths) {
				t.Fatalf("permissions = %+v, want %+v", eff.Permissions, tt.want)
			}
		})
	}
	t.Run("artifact naming an image", func(t *testing.T) {
		a := art(abi.Permissions{})
		a.Image = "r.example/other:v1"
		if _, err := effective(abi.Manifest{Name: "x", Image: "r.example/p:v1"}, a, d); err == nil {
			t.Fatal("an artifact whose manifest is a reference was accepted")
		}
	})
}

func TestNoPolicy_Verify(t *testing.T) {
	if err := (NoPolicy{}).Verify(t.Context(), mustDigest(t), nil, ""); err != nil {
		t.Fatalf("nothing required: %v", err)
	}
	if err := (NoPolicy{}).Verify(t.Context(), mustDigest(t), &abi.Verification{Keys: []string{"k.pub"}}, ""); err == nil {
		t.Fatal("signatures required and accepted without a verifier")
	}
}
