package imagecreds

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Entry is one registry's credentials in a docker config.
type Entry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// DockerConfig maps a registry key (host[:port][/path], or a URL) to its
// credentials: the "auths" of a config.json, or a whole .dockercfg.
type DockerConfig map[string]Entry

// decode fills Username and Password from Auth (base64 of user:password,
// padded or not), which wins over them as in docker's own loader.
func (e *Entry) decode() error {
	if e.Auth == "" {
		return nil
	}
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(e.Auth), "=") {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(strings.TrimSpace(e.Auth))
	if err != nil {
		return fmt.Errorf("field auth: not base64: %v", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return errors.New("field auth: not base64 of username:password")
	}
	e.Username, e.Password, e.Auth = user, pass, ""
	return nil
}

// parseAuths decodes a .dockercfg body (a map of keys to entries) and each
// entry's auth field; errors name the key.
func parseAuths(b []byte) (DockerConfig, error) {
	var cfg DockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("not a JSON object of registries: %v", err)
	}
	for k, e := range cfg {
		if err := e.decode(); err != nil {
			return nil, fmt.Errorf("registry %q: %w", k, err)
		}
		cfg[k] = e
	}
	return cfg, nil
}

// ParseConfigJSON decodes a docker config.json ({"auths": {...}}).
// Credential helpers (credsStore, credHelpers) are not run.
func ParseConfigJSON(b []byte) (DockerConfig, error) {
	var f struct {
		Auths json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a docker config.json: %v", err)
	}
	if len(f.Auths) == 0 || string(f.Auths) == "null" {
		return nil, errors.New(`no "auths" in it`)
	}
	return parseAuths(f.Auths)
}

// FromSecret decodes an image pull Secret: type
// kubernetes.io/dockerconfigjson (key .dockerconfigjson, a config.json) or
// kubernetes.io/dockercfg (key .dockercfg, the auths map alone). Errors
// name the Secret.
func FromSecret(s *v1.Secret) (DockerConfig, error) {
	name := "secret " + s.Namespace + "/" + s.Name
	var key string
	var parse func([]byte) (DockerConfig, error)
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		key, parse = v1.DockerConfigJsonKey, ParseConfigJSON
	case v1.SecretTypeDockercfg:
		key, parse = v1.DockerConfigKey, parseAuths
	default:
		return nil, fmt.Errorf("%s: type %q is not an image pull secret (want %s or %s)", name, s.Type, v1.SecretTypeDockerConfigJson, v1.SecretTypeDockercfg)
	}
	b, ok := s.Data[key]
	if !ok || len(strings.TrimSpace(string(b))) == 0 {
		return nil, fmt.Errorf("%s: no data key %s", name, key)
	}
	cfg, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, key, err)
	}
	return cfg, nil
}

// ReadConfigFile reads a docker config.json file; errors name the file.
func ReadConfigFile(path string) (DockerConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfigJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}
