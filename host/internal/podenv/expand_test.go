package podenv

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "b", "EMPTY": "", "NEST": "$(A)"}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(B)z", "xaybz"},
		{"$(A);;$(B)", "a;;b"},
		{"$(EMPTY)", ""},
		{"$(NEST)", "$(A)"}, // values are not expanded again
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$(A)$(UNKNOWN)", "a$(UNKNOWN)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$a"},
		{"$$", "$"},
		{"$$$$", "$$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"$(A$(B)", "$(A$(B)"}, // the name runs to the first ')': "A$(B"
		{"$($(A))", "$($(A))"},
		{"$()", "$()"},
		{"$é", "$é"},
		{"$\xff", "$\uFFFD"}, // as the kubelet: the decoded rune is written
		{"${A}", "${A}"},
	} {
		if got := Expand(tc.in, vars); got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCommandAndArgs(t *testing.T) {
	env := []EnvVar{{"TEST_VAR", "test-value"}, {"X", "1"}, {"X", "2"}}
	for _, tc := range []struct {
		name                 string
		c                    v1.Container
		wantCommand, wantArg []string
	}{
		{"none", v1.Container{}, nil, nil},
		{
			"command",
			v1.Container{Command: []string{"sh", "-c", `TEST_VAR=wrong echo "$(TEST_VAR)"`}},
			[]string{"sh", "-c", `TEST_VAR=wrong echo "test-value"`}, nil,
		},
		{
			"args",
			v1.Container{Command: []string{"sh", "-c"}, Args: []string{`echo "$(TEST_VAR)" $(X) $$(X) $(NOPE)`}},
			[]string{"sh", "-c"}, []string{`echo "test-value" 2 $(X) $(NOPE)`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, args := CommandAndArgs(&tc.c, env)
			if !reflect.DeepEqual(cmd, tc.wantCommand) || !reflect.DeepEqual(args, tc.wantArg) {
				t.Errorf("got %q %q, want %q %q", cmd, args, tc.wantCommand, tc.wantArg)
			}
		})
	}
}

func TestStaticCommand(t *testing.T) {
	env := []v1.EnvVar{
		{Name: "A", Value: "a"},
		{Name: "F", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	got := StaticCommand([]string{"cat", "/$(A)/$(F)/$(B)"}, env)
	want := []string{"cat", "/a//$(B)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := StaticCommand(nil, env); got != nil {
		t.Errorf("nil command gave %q", got)
	}
}

func TestSubPath(t *testing.T) {
	env := []EnvVar{
		{"POD_NAME", "pod-1"}, {"NS", "ns"}, {"EMPTY", ""},
		{"DOTS", ".."}, {"ABS", "/tmp"}, {"DIR", "a/b"},
	}
	for _, tc := range []struct {
		expr, want, err string
	}{
		{"", "", ""},
		{"$(POD_NAME)", "pod-1", ""},
		{"$(NS)/$(POD_NAME)/logs", "ns/pod-1/logs", ""},
		{"$(DIR)", "a/b", ""},
		{"static", "static", ""},
		{"a..b/$(POD_NAME)", "a..b/pod-1", ""},
		{"$$(POD_NAME)", "$(POD_NAME)", ""},
		{"$(MISSING)", "", "missing value for MISSING"},
		{"$(EMPTY)/$(MISSING)/$(A)", "", "missing value for A, EMPTY, MISSING"},
		{"$(DOTS)", "", "unable to provision SubPath `..`: must not contain '..'"},
		{"x/$(DOTS)/y", "", "unable to provision SubPath `x/../y`: must not contain '..'"},
		{"$(ABS)", "", "error SubPath `/tmp` must not be an absolute path"},
		{"/$(POD_NAME)", "", "error SubPath `/pod-1` must not be an absolute path"},
	} {
		got, err := SubPath(tc.expr, env)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("SubPath(%q) = %q, %v; want error %q", tc.expr, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SubPath(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
}

func TestCheckSubPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"": true, "a": true, "a/b": true, "..a": true, "a/..b": true,
		"..": false, "../a": false, "a/..": false, "/a": false,
	} {
		if err := CheckSubPath(p); (err == nil) != ok {
			t.Errorf("CheckSubPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}
