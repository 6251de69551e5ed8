package podenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestEnvFileValue(t *testing.T) {
	const file = `# settings
A='one'
  B='two words' # a comment
C=  'ignored'
M='first
second'

E=''
`
	for _, tc := range []struct {
		key, want, err string
	}{
		{key: "A", want: "one"},
		{key: "B", want: "two words"},
		{key: "C", want: ""},
		{key: "M", want: "first\nsecond"},
		{key: "E", want: ""},
		{key: "X", err: "key not found"},
	} {
		got, err := envFileValue(strings.NewReader(file), tc.key)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("key %s: %q, %v; want error %q", tc.key, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("key %s: %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for in, want := range map[string]string{
		"NOEQUALS\n":       "line 1: no '='",
		"=x\n":             "line 1: empty variable name",
		"K ='v'\n":         "line 1: whitespace before '='",
		"K=v\n":            "line 1: the value of K is not in single quotes",
		"K='v' trailing\n": "line 1: text after the closing quote",
		"A='1'\nK='open\n": "line 2: the quote opened there is never closed",
	} {
		if _, err := envFileValue(strings.NewReader(in), "K"); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestResolver_Env_fileKeyRef(t *testing.T) {
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "config.env"), []byte("CONFIG_1='value1'\nCONFIG_2='value2'\nEMPTY=''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.env")
	if err := os.WriteFile(outside, []byte("K='stolen'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "escape.env")); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}}}
	r := New(Config{VolumePath: func(p *v1.Pod, name string) (string, error) {
		if name != "config" {
			return "", fmt.Errorf("volume %q not in pod spec", name)
		}
		return vol, nil
	}})
	ref := func(volume, path, key string, optional bool) v1.EnvVar {
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
			VolumeName: volume, Path: path, Key: key, Optional: &optional}}}
	}
	for _, tc := range []struct {
		name string
		env  v1.EnvVar
		want string // "" with no error: the variable is left out
		err  string
	}{
		{name: "a key", env: ref("config", "config.env", "CONFIG_2", false), want: "value2"},
		{name: "a missing key", env: ref("config", "config.env", "NOPE", false), err: `env var V: key "NOPE" not found in env file "config.env" of volume "config"`},
		{name: "a missing optional key", env: ref("config", "config.env", "NOPE", true)},
		{name: "an empty value", env: ref("config", "config.env", "EMPTY", false), err: `env var V: key "EMPTY" not found`},
		{name: "a missing optional file", env: ref("config", "none.env", "K", true)},
		{name: "a missing file", env: ref("config", "none.env", "K", false), err: `env var V: env file "none.env" in volume "config"`},
		{name: "an unknown volume", env: ref("other", "config.env", "K", false), err: `env var V: cannot find the volume "other" referenced by fileKeyRef`},
		{name: "a link out of the volume", env: ref("config", "escape.env", "K", false), err: `env var V: env file "escape.env" in volume "config"`},
		{name: "a path out of the volume", env: ref("config", "../secret.env", "K", false), err: `env var V: env file "../secret.env" in volume "config"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Env(t.Context(), pod, &v1.Container{Env: []v1.EnvVar{tc.env}}, nil)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("Env = %v, %v; want an error starting %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []EnvVar
			if tc.want != "" {
				want = []EnvVar{{"V", tc.want}}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Env = %v, want %v", got, want)
			}
		})
	}
}
