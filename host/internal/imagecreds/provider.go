package imagecreds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"sigs.k8s.io/yaml"
)

// execTimeout bounds one run of a provider, as the kubelet's.
const execTimeout = time.Minute

// configKind and configVersions are what a provider config file may be.
var configVersions = map[string]bool{"kubelet.config.k8s.io/v1": true, "kubelet.config.k8s.io/v1beta1": true}

// apiVersions are the CredentialProviderRequest/Response versions spoken;
// they share one shape.
var apiVersions = map[string]bool{
	credentialproviderv1.SchemeGroupVersion.String(): true,
	"credentialprovider.kubelet.k8s.io/v1beta1":      true,
	"credentialprovider.kubelet.k8s.io/v1alpha1":     true,
}

// ProvidersConfig configures the exec credential provider plugins.
type ProvidersConfig struct {
	// ConfigFile is a CredentialProviderConfig (kubelet.config.k8s.io/v1),
	// as the kubelet's --image-credential-provider-config.
	ConfigFile string
	// BinDir holds the providers' executables, each named as its
	// provider (--image-credential-provider-bin-dir).
	BinDir string
	// Logger receives a provider's failures; nil discards.
	Logger hclog.Logger
}

// Providers runs the exec credential provider plugins of a
// CredentialProviderConfig and caches what they return.
type Providers struct {
	list []*provider
}

// provider is one configured plugin and its cache.
type provider struct {
	name         string
	path         string
	args         []string
	env          []string
	apiVersion   string
	matchImages  []string
	defaultCache time.Duration
	log          hclog.Logger
	now          func() time.Time

	mu    sync.Mutex
	cache map[string]cached // by image, registry or globalKey
}

// cached is a provider response kept until expires.
type cached struct {
	cfg     DockerConfig
	expires time.Time
}

// globalKey is the cache key of a Global response.
const globalKey = "*global*"

// LoadProviders reads and checks the provider config file. Each provider
// needs a name that is a file name of BinDir, matchImages that parse,
// defaultCacheDuration ≥ 0 and a supported apiVersion; tokenAttributes
// (service-account tokens for providers) is refused. Errors name the file
// and the provider.
func LoadProviders(cfg ProvidersConfig) (*Providers, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	b, err := os.ReadFile(cfg.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("credential provider config: %w", err)
	}
	var pc kubeletconfigv1.CredentialProviderConfig
	if err := yaml.UnmarshalStrict(b, &pc); err != nil {
		return nil, fmt.Errorf("credential provider config %s: %w", cfg.ConfigFile, err)
	}
	fail := func(format string, a ...any) (*Providers, error) {
		return nil, fmt.Errorf("credential provider config %s: "+format, append([]any{cfg.ConfigFile}, a...)...)
	}
	if !configVersions[pc.APIVersion] || pc.Kind != "CredentialProviderConfig" {
		return fail("apiVersion %q kind %q, want kubelet.config.k8s.io/v1 CredentialProviderConfig", pc.APIVersion, pc.Kind)
	}
	if len(pc.Providers) == 0 {
		return fail("no providers")
	}
	if cfg.BinDir == "" {
		return fail("no provider bin dir (--image-credential-provider-bin-dir)")
	}
	p := &Providers{}
	seen := map[string]bool{}
	for i, c := range pc.Providers {
		at := fmt.Sprintf("providers[%d] %q", i, c.Name)
		switch {
		case c.Name == "" || c.Name == "." || c.Name == ".." || strings.ContainsAny(c.Name, "/ "):
			return fail("%s: name must be a file name in %s", at, cfg.BinDir)
		case seen[c.Name]:
			return fail("%s: name given twice", at)
		case !apiVersions[c.APIVersion]:
			return fail("%s: apiVersion %q, want %s", at, c.APIVersion, credentialproviderv1.SchemeGroupVersion)
		case len(c.MatchImages) == 0:
			return fail("%s: no matchImages", at)
		case c.DefaultCacheDuration == nil || c.DefaultCacheDuration.Duration < 0:
			return fail("%s: defaultCacheDuration is required and may not be negative", at)
		case c.TokenAttributes != nil:
			return fail("%s: tokenAttributes (service-account tokens for providers) is not supported", at)
		}
		for _, m := range c.MatchImages {
			if !validPattern(m) {
				return fail("%s: matchImages entry %q is not [*.]host[:port][/path]", at, m)
			}
		}
		seen[c.Name] = true
		pr := &provider{
			name: c.Name, path: filepath.Join(cfg.BinDir, c.Name), args: c.Args,
			apiVersion: c.APIVersion, matchImages: c.MatchImages,
			defaultCache: c.DefaultCacheDuration.Duration,
			log:          cfg.Logger.With("provider", c.Name), now: time.Now,
			cache: map[string]cached{},
		}
		for _, e := range c.Env {
			pr.env = append(pr.env, e.Name+"="+e.Value)
		}
		p.list = append(p.list, pr)
	}
	return p, nil
}

// Lookup asks every provider whose matchImages match image (a repository
// without tag or digest) for credentials, from its cache while that is
// fresh, and returns what they gave, in the config's order, as a keyring
// lookup of image. A provider that fails is left out: its error, naming
// it, is among the returned errors, the other providers' credentials are
// still returned.
func (p *Providers) Lookup(ctx context.Context, image string) ([]Credential, error) {
	if p == nil {
		return nil, nil
	}
	var out []Credential
	var errs []error
	for _, pr := range p.list {
		if !pr.matches(image) {
			continue
		}
		cfg, err := pr.provide(ctx, image)
		if err != nil {
			pr.log.Warn("credential provider failed", "image", image, "error", err)
			errs = append(errs, err)
			continue
		}
		var k Keyring
		k.Add("credential provider "+pr.name, cfg)
		out = append(out, k.Lookup(image)...)
	}
	return out, errors.Join(errs...)
}

// matches reports whether one of the provider's matchImages matches image.
func (pr *provider) matches(image string) bool {
	for _, m := range pr.matchImages {
		if Match(m, image) {
			return true
		}
	}
	return false
}

// registryOf is the registry (host[:port]) of a repository.
func registryOf(image string) string {
	r, _, _ := strings.Cut(image, "/")
	return r
}

// provide returns the provider's credentials for image: a fresh cached
// response (by image, then registry, then global), else a run of the
// provider, cached per its cacheKeyType for its cacheDuration (the
// config's defaultCacheDuration when it gives none; 0 caches nothing).
func (pr *provider) provide(ctx context.Context, image string) (DockerConfig, error) {
	now := pr.now()
	pr.mu.Lock()
	for _, key := range []string{image, registryOf(image), globalKey} {
		c, ok := pr.cache[key]
		if ok && now.Before(c.expires) {
			pr.mu.Unlock()
			return c.cfg, nil
		}
		if ok {
			delete(pr.cache, key)
		}
	}
	pr.mu.Unlock()

	resp, err := pr.exec(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("credential provider %s: %w", pr.name, err)
	}
	var key string
	switch resp.CacheKeyType {
	case credentialproviderv1.ImagePluginCacheKeyType:
		key = image
	case credentialproviderv1.RegistryPluginCacheKeyType:
		key = registryOf(image)
	case credentialproviderv1.GlobalPluginCacheKeyType:
		key = globalKey
	default:
		return nil, fmt.Errorf("credential provider %s: image %s: cacheKeyType %q, want Image, Registry or Global", pr.name, image, resp.CacheKeyType)
	}
	cfg := DockerConfig{}
	for k, a := range resp.Auth {
		cfg[k] = Entry{Username: a.Username, Password: a.Password}
	}
	d := pr.defaultCache
	if resp.CacheDuration != nil {
		d = resp.CacheDuration.Duration
	}
	if d > 0 {
		pr.mu.Lock()
		pr.cache[key] = cached{cfg: cfg, expires: now.Add(d)}
		pr.mu.Unlock()
	}
	return cfg, nil
}

// exec runs the provider with the request on stdin and decodes its
// response, which must be of the provider's apiVersion.
func (pr *provider) exec(ctx context.Context, image string) (*credentialproviderv1.CredentialProviderResponse, error) {
	req, err := json.Marshal(map[string]string{"apiVersion": pr.apiVersion, "kind": "CredentialProviderRequest", "image": image})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, pr.path, pr.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &stdout, &stderr
	cmd.Env = append(os.Environ(), pr.env...)
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("image %s: %w: %s", image, err, msg)
		}
		return nil, fmt.Errorf("image %s: %w", image, err)
	}
	var resp credentialproviderv1.CredentialProviderResponse
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("image %s: the response is not a CredentialProviderResponse: %v", image, err)
	}
	if resp.APIVersion != pr.apiVersion || resp.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("image %s: response apiVersion %q kind %q, want %s CredentialProviderResponse", image, resp.APIVersion, resp.Kind, pr.apiVersion)
	}
	return &resp, nil
}
