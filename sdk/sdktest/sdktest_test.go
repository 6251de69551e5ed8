package sdktest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/abi"
)

func TestUncalled(t *testing.T) {
	hook := []abi.Kind{abi.KindHook}
	tests := []struct {
		name    string
		m       abi.Manifest
		handled []abi.HookPoint
		want    []string // each a substring of one message, in order
	}{
		{"Hook at the default points", abi.Manifest{Kinds: hook}, abi.DefaultHookPoints, nil},
		{"Validator listed", abi.Manifest{Kinds: hook, Points: []abi.HookPoint{abi.HookValidate}}, []abi.HookPoint{abi.HookValidate}, nil},
		{"Validator and PostStopper, points empty", abi.Manifest{Kinds: hook}, []abi.HookPoint{abi.HookValidate, abi.HookPostStop},
			[]string{"handles Validate", "handles PostStop"}},
		{"PreUpdater, points list others", abi.Manifest{Kinds: hook, Points: []abi.HookPoint{abi.HookPreCreate}}, []abi.HookPoint{abi.HookPreCreate, abi.HookPreUpdate},
			[]string{"handles PreUpdate, which the manifest's points [PreCreate] leave out"}},
		{"an admission plugin has no points", abi.Manifest{Kinds: []abi.Kind{abi.KindAdmission}}, []abi.HookPoint{abi.HookValidate}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := uncalled(tt.m, tt.handled)
			if len(got) != len(tt.want) {
				t.Fatalf("uncalled = %q, want %d messages %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("message %d = %q, want one containing %q", i, got[i], w)
				}
			}
			if len(tt.want) == 0 && !reflect.DeepEqual(got, []string(nil)) {
				t.Errorf("uncalled = %q, want none", got)
			}
		})
	}
}
