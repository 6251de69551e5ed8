package imagecreds

import (
	"reflect"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, image string
		want           bool
	}{
		{"registry.example.com", "registry.example.com/team/app", true},
		{"registry.example.com", "other.example.com/team/app", false},
		{"*.example.com", "registry.example.com/app", true},
		{"*.example.com", "a.registry.example.com/app", false}, // a glob is one label
		{"*.example.com", "example.com/app", false},
		{"app*.example.com", "app1.example.com/x", true},
		{"app*.example.com", "web.example.com/x", false},
		{"registry.*", "registry.io/x", true},
		{"*.*.registry.io", "a.b.registry.io/x", true},
		{"registry.example.com:5000", "registry.example.com:5000/app", true},
		{"registry.example.com:5000", "registry.example.com/app", false},
		{"registry.example.com", "registry.example.com:5000/app", false},
		{"127.0.0.1:5000", "127.0.0.1:5000/app", true},
		{"registry.example.com/team", "registry.example.com/team/app", true},
		{"registry.example.com/team", "registry.example.com/other/app", false},
		{"registry.example.com/team/app", "registry.example.com/team", false},
		{"[x.example.com", "x.example.com/app", false}, // a bad glob matches nothing
	} {
		if got := Match(tc.pattern, tc.image); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.image, got, tc.want)
		}
	}
}

func TestKeyring_Lookup(t *testing.T) {
	var k Keyring
	k.Add("broad", DockerConfig{
		"https://registry.example.com/v1/": {Username: "registry"},
		"*.example.com":                    {Username: "wildcard"},
	})
	k.Add("narrow", DockerConfig{
		"registry.example.com/team":     {Username: "team"},
		"registry.example.com/team/app": {Username: "app"},
		"registry.example.com:5000":     {Username: "port"},
		"index.docker.io":               {Username: "hub"},
	})
	users := func(cs []Credential) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Username)
		}
		return out
	}
	for _, tc := range []struct {
		image string
		want  []string
	}{
		// The longest key first, the registry's and a glob's after.
		{"registry.example.com/team/app", []string{"app", "team", "registry", "wildcard"}},
		{"registry.example.com/team/web", []string{"team", "registry", "wildcard"}},
		{"registry.example.com/other", []string{"registry", "wildcard"}},
		{"mirror.example.com/app", []string{"wildcard"}},
		{"registry.example.com:5000/app", []string{"port"}},
		{"docker.io/library/busybox", []string{"hub"}},
		{"quay.io/app", nil},
	} {
		if got := users(k.Lookup(tc.image)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
	if got := k.Lookup("registry.example.com/team/app")[0].Source; got != "narrow" {
		t.Errorf("source = %q, want narrow", got)
	}
}

func TestRepository(t *testing.T) {
	for image, want := range map[string]string{
		"busybox":                                             "docker.io/library/busybox",
		"busybox:1.36":                                        "docker.io/library/busybox",
		"team/app@sha256:" + sixtyFourZeros:                   "docker.io/team/app",
		"127.0.0.1:5000/private/testbox:1.0":                  "127.0.0.1:5000/private/testbox",
		"registry.example.com/a/b/c:latest":                   "registry.example.com/a/b/c",
		"registry.example.com:443/a@sha256:" + sixtyFourZeros: "registry.example.com:443/a",
	} {
		got, err := Repository(image)
		if err != nil || got != want {
			t.Errorf("Repository(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	if _, err := Repository("UPPER/case"); err == nil {
		t.Error("Repository(UPPER/case): no error")
	}
}

const sixtyFourZeros = "0000000000000000000000000000000000000000000000000000000000000000"
