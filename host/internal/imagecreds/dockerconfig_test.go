package imagecreds

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func secret(typ v1.SecretType, key, value string) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pull"},
		Type:       typ,
		Data:       map[string][]byte{key: []byte(value)},
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestFromSecret(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret *v1.Secret
		want   Entry // of registry.example.com
	}{
		{"dockerconfigjson auth", secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"registry.example.com":{"auth":"`+b64("alice:s3cr:et")+`"}}}`), Entry{Username: "alice", Password: "s3cr:et"}},
		{"dockerconfigjson unpadded auth", secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"registry.example.com":{"auth":"`+strings.TrimRight(b64("bob:pw"), "=")+`"}}}`), Entry{Username: "bob", Password: "pw"}},
		{"dockerconfigjson username", secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"registry.example.com":{"username":"carol","password":"pw","email":"c@example.com"}}}`), Entry{Username: "carol", Password: "pw"}},
		{"dockercfg", secret(v1.SecretTypeDockercfg, v1.DockerConfigKey,
			`{"registry.example.com":{"auth":"`+b64("dave:pw")+`","email":"d@example.com"}}`), Entry{Username: "dave", Password: "pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := FromSecret(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg["registry.example.com"]; got != tc.want {
				t.Errorf("entry = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFromSecret_Errors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret *v1.Secret
		want   string
	}{
		{"bad base64", secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"registry.example.com":{"auth":"!!!"}}}`), `registry "registry.example.com": field auth: not base64`},
		{"no colon", secret(v1.SecretTypeDockercfg, v1.DockerConfigKey,
			`{"registry.example.com":{"auth":"`+b64("nocolon")+`"}}`), "not base64 of username:password"},
		{"no auths", secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"credsStore":"x"}`), `no "auths"`},
		{"missing key", secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigKey, `{}`), "no data key .dockerconfigjson"},
		{"empty", secret(v1.SecretTypeDockercfg, v1.DockerConfigKey, ` `), "no data key .dockercfg"},
		{"not JSON", secret(v1.SecretTypeDockercfg, v1.DockerConfigKey, `auths`), "not a JSON object"},
		{"wrong type", secret(v1.SecretTypeOpaque, v1.DockerConfigJsonKey, `{}`), `type "Opaque" is not an image pull secret`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromSecret(tc.secret)
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); !strings.Contains(msg, "secret team/pull") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: want it to name secret team/pull and say %q", msg, tc.want)
			}
		})
	}
}

func TestReadConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "config.json")
	os.WriteFile(good, []byte(`{"auths":{"https://index.docker.io/v1/":{"auth":"`+b64("u:p")+`"}},"credsStore":"desktop"}`), 0o600)
	cfg, err := ReadConfigFile(good)
	if err != nil {
		t.Fatal(err)
	}
	var k Keyring
	k.Add(good, cfg)
	if got := k.Lookup("docker.io/library/busybox"); len(got) != 1 || got[0].Username != "u" || got[0].Password != "p" {
		t.Errorf("Lookup = %+v, want u:p from index.docker.io", got)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[]`), 0o600)
	if _, err := ReadConfigFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("error %v: want it to name %s", err, bad)
	}
}
