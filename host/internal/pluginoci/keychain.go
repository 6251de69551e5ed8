package pluginoci

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	clitypes "github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// dockerKeychain resolves credentials from one docker config file, the way
// authn.DefaultKeychain does from ~/.docker/config.json.
type dockerKeychain struct {
	source string
	get    func(key string) (clitypes.AuthConfig, error)
}

// Resolve implements authn.Keychain: the credentials of the longest key of
// the file matching the repository, then the registry; Anonymous if none.
func (k dockerKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		cfg, err := k.get(key)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s from %s: %w", key, k.source, err)
		}
		cfg.ServerAddress = ""
		if cfg != (clitypes.AuthConfig{}) {
			return authn.FromConfig(authn.AuthConfig{
				Username:      cfg.Username,
				Password:      cfg.Password,
				Auth:          cfg.Auth,
				IdentityToken: cfg.IdentityToken,
				RegistryToken: cfg.RegistryToken,
			}), nil
		}
	}
	return authn.Anonymous, nil
}

// KeychainFromDockerConfigFile returns a keychain of the credentials in a
// docker config.json (the file `docker login` writes), its credential
// helpers (credsStore, credHelpers) included, as docker would use them.
func KeychainFromDockerConfigFile(path string) (authn.Keychain, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registry config: %w", err)
	}
	cf, err := config.LoadFromReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("registry config %s: %w", path, err)
	}
	cf.Filename = path
	return dockerKeychain{source: path, get: cf.GetAuthConfig}, nil
}

// KeychainFromSecret returns a keychain of the credentials in a Kubernetes
// image pull Secret: type kubernetes.io/dockerconfigjson (data
// .dockerconfigjson, a docker config.json) or the older
// kubernetes.io/dockercfg (data .dockercfg, its "auths" map alone). Only
// the auths are used: a credential helper named in a Secret is ignored, as
// the node would otherwise run a program the Secret's author chose.
func KeychainFromSecret(s *corev1.Secret) (authn.Keychain, error) {
	source := "secret " + s.Namespace + "/" + s.Name
	var b []byte
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		b = s.Data[corev1.DockerConfigJsonKey]
	case corev1.SecretTypeDockercfg:
		b = append(append([]byte(`{"auths":`), s.Data[corev1.DockerConfigKey]...), '}')
	default:
		return nil, fmt.Errorf("%s: type %q, want %s or %s", source, s.Type, corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg)
	}
	if len(bytes.TrimSpace(b)) == 0 || string(b) == `{"auths":}` {
		return nil, fmt.Errorf("%s: no %s data", source, s.Type)
	}
	cf, err := config.LoadFromReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return dockerKeychain{source: source, get: staticAuths(cf)}, nil
}

// staticAuths looks a key up in a config's auths only: exactly, then by
// host name (a key may be a URL such as https://index.docker.io/v1/).
func staticAuths(cf *configfile.ConfigFile) func(string) (clitypes.AuthConfig, error) {
	auths := cf.GetAuthConfigs()
	return func(key string) (clitypes.AuthConfig, error) {
		if a, ok := auths[key]; ok {
			return a, nil
		}
		for k, a := range auths {
			if hostOf(k) == key {
				return a, nil
			}
		}
		return clitypes.AuthConfig{}, nil
	}
}

// hostOf strips a scheme and a path from a docker config key.
func hostOf(key string) string {
	if i := strings.Index(key, "://"); i >= 0 {
		key = key[i+3:]
	}
	if i := strings.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	return key
}

// freshKeychain asks its keychain for the credentials again at every
// request instead of once: the Client's reads reuse one authenticated
// transport per repository for as long as the Client lives, and a
// credential helper's token, or a rewritten Secret, must still reach them.
// Anonymous stays Anonymous, as go-containerregistry handles it apart.
type freshKeychain struct{ kc authn.Keychain }

// Resolve implements authn.Keychain.
func (k freshKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	a, err := k.kc.Resolve(target)
	if err != nil || a == authn.Anonymous {
		return a, err
	}
	return freshAuthenticator{kc: k.kc, target: target}, nil
}

// freshAuthenticator resolves target's credentials at each use.
type freshAuthenticator struct {
	kc     authn.Keychain
	target authn.Resource
}

// Authorization implements authn.Authenticator.
func (a freshAuthenticator) Authorization() (*authn.AuthConfig, error) {
	auth, err := a.kc.Resolve(a.target)
	if err != nil {
		return nil, err
	}
	return auth.Authorization()
}
