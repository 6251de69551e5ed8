package pluginoci

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrUnauthorized: the registry refused the request for want of valid
// credentials (401) or of permission (403).
var ErrUnauthorized = errors.New("registry refused the credentials")

// Config configures a Client.
type Config struct {
	// Keychain finds the credentials for a registry; nil means
	// authn.DefaultKeychain (~/.docker/config.json, $DOCKER_CONFIG).
	Keychain authn.Keychain
	// CAFile is a PEM file of certificate authorities trusted besides the
	// system's, for a registry with a private CA.
	CAFile string
	// Transport replaces the HTTP transport (CAFile is then not used); the
	// rule that plain HTTP goes only to loopback still applies.
	Transport http.RoundTripper
	// Limits caps what a pull reads.
	Limits Limits
	// UserAgent is sent to the registry; default "wasmlet".
	UserAgent string
}

// Client pushes and pulls plugins. Its reads share one authenticated
// transport per repository (a go-containerregistry Puller): the registry
// is pinged and the authentication scheme set up once, not once per
// request; the credentials are still asked of the keychain at each request
// (freshKeychain), so rotated ones are used at once.
type Client struct {
	keychain  authn.Keychain
	transport http.RoundTripper
	limits    Limits
	userAgent string
	puller    *remote.Puller
}

// New returns a Client, or an error when the CA file cannot be used.
func New(cfg Config) (*Client, error) {
	c := &Client{keychain: cfg.Keychain, limits: cfg.Limits.withDefaults(), userAgent: cfg.UserAgent}
	if c.keychain == nil {
		c.keychain = authn.DefaultKeychain
	}
	if c.userAgent == "" {
		c.userAgent = "wasmlet"
	}
	base := cfg.Transport
	if base == nil {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("registry CA: %w", err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("registry CA %s: no PEM certificate in it", cfg.CAFile)
			}
		}
		t := remote.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		base = t
	}
	c.transport = loopbackOnlyHTTP{base}
	c.puller = c.newPuller()
	return c, nil
}

// newPuller returns a Puller of c's keychain, transport and user agent:
// the authenticated transports c's reads reuse. NewPuller fails only on an
// option that fails, which none of c's do; were it to, nil makes each
// read authenticate on its own, as go-containerregistry does by default.
func (c *Client) newPuller() *remote.Puller {
	p, err := remote.NewPuller(c.base()...)
	if err != nil {
		return nil
	}
	return p
}

// loopbackOnlyHTTP refuses a plain HTTP request to anything but loopback:
// go-containerregistry falls back to HTTP for private (RFC 1918) addresses
// too, and a redirect may point anywhere.
type loopbackOnlyHTTP struct{ next http.RoundTripper }

func (t loopbackOnlyHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("%w: %s://%s", ErrInsecure, req.URL.Scheme, req.URL.Host)
	}
	return t.next.RoundTrip(req)
}

// isLoopback reports whether host (no port) is localhost or a loopback IP.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseReference parses an image reference (REGISTRY/REPO[:TAG|@DIGEST]).
// A registry on loopback (localhost, 127.0.0.0/8, ::1) may be plain HTTP;
// any other is reached over TLS only.
func ParseReference(s string) (name.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, err
	}
	host := ref.Context().RegistryStr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if isLoopback(host) {
		return name.ParseReference(s, name.Insecure)
	}
	return ref, nil
}

// WithKeychain returns a Client like c that finds credentials in kc (for
// a caller whose credentials change from one request to the next, such as
// an image pull that carries its own).
// The copy authenticates on its own: it shares no transport with c.
func (c *Client) WithKeychain(kc authn.Keychain) *Client {
	cp := *c
	cp.keychain = kc
	cp.puller = cp.newPuller()
	return &cp
}

// RemoteOptions are the go-containerregistry options the client reaches a
// registry with — its keychain, its transport (with the loopback-only rule
// for plain HTTP and the CA file), its user agent and its Puller, whose
// authenticated transports reads reuse — for packages that read or write
// other objects in the same registry, such as signatures.
func (c *Client) RemoteOptions(ctx context.Context) []remote.Option {
	return c.options(ctx)
}

func (c *Client) options(ctx context.Context) []remote.Option {
	opts := append(c.base(), remote.WithContext(ctx))
	if c.puller != nil {
		opts = append(opts, remote.Reuse(c.puller))
	}
	return opts
}

// base are the options every request is made with.
func (c *Client) base() []remote.Option {
	return []remote.Option{
		remote.WithAuthFromKeychain(freshKeychain{c.keychain}),
		remote.WithTransport(c.transport),
		remote.WithUserAgent(c.userAgent),
	}
}

// Explain adds what a registry's refusal means to err: ErrUnauthorized for
// a 401 or 403, a hint at --registry-ca for an unknown certificate
// authority.
func Explain(err error) error {
	return explain(err)
}

// explain adds what a registry's refusal means to err.
func explain(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%w (HTTP %d; credentials come from ~/.docker/config.json or --registry-config): %w", ErrUnauthorized, te.StatusCode, err)
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return fmt.Errorf("the registry's certificate is not signed by a trusted CA (--registry-ca FILE trusts a private one): %w", err)
	}
	return err
}

// Push checks p as the agent would load it, lays it out as a Wasm OCI
// artifact and writes it to ref. It returns the manifest's digest.
func (c *Client) Push(ctx context.Context, ref string, p *Plugin, meta Meta) (v1.Hash, error) {
	fail := func(err error) (v1.Hash, error) { return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err) }
	r, err := ParseReference(ref)
	if err != nil {
		return fail(err)
	}
	if err := p.check(); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrPlugin, err))
	}
	a, err := newArtifact(p, meta)
	if err != nil {
		return fail(err)
	}
	img, err := a.image()
	if err != nil {
		return fail(err)
	}
	if err := remote.Write(r, img, c.options(ctx)...); err != nil {
		return fail(explain(err))
	}
	d, err := img.Digest()
	if err != nil {
		return fail(err)
	}
	return d, nil
}

// Resolve returns the digest of the manifest ref names now, by a HEAD
// request (go-containerregistry falls back to GET when the registry
// answers none), and checks that it is an OCI image manifest. Nothing else
// is read.
func (c *Client) Resolve(ctx context.Context, ref string) (v1.Hash, error) {
	fail := func(err error) (v1.Hash, error) { return v1.Hash{}, fmt.Errorf("resolve %s: %w", ref, err) }
	r, err := ParseReference(ref)
	if err != nil {
		return fail(err)
	}
	desc, err := remote.Head(r, c.options(ctx)...)
	if err != nil {
		return fail(explain(err))
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		return fail(fmt.Errorf("%w: %s is a %q, want an OCI image manifest (%s)", ErrNotPlugin, desc.Digest, desc.MediaType, types.OCIManifestSchema1))
	}
	return desc.Digest, nil
}

// Manifest is a plugin artifact's manifest as read from a registry: its
// digest (of the bytes read) and its content, checked to be an OCI image
// manifest within the size cap. Blobs pulls the rest.
type Manifest struct {
	// Digest is the sha256 of the manifest's bytes: for a tag, what the
	// tag named when it was read.
	Digest   v1.Hash
	repo     name.Repository
	manifest *v1.Manifest
}

// Manifest reads the manifest ref names (a tag or a digest) with one GET:
// a tag is resolved and its manifest read by the same request, its digest
// computed from the bytes read; a digest reference's content is checked
// against its digest. Errors name ref.
func (c *Client) Manifest(ctx context.Context, ref string) (*Manifest, error) {
	m, err := c.manifest(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", ref, err)
	}
	return m, nil
}

// manifest is Manifest; its errors name no reference.
func (c *Client) manifest(ctx context.Context, ref string) (*Manifest, error) {
	fail := func(err error) (*Manifest, error) { return nil, err }
	r, err := ParseReference(ref)
	if err != nil {
		return fail(err)
	}
	desc, err := remote.Get(r, c.options(ctx)...)
	if err != nil {
		return fail(explain(err))
	}
	if len(desc.Manifest) > manifestLimit {
		return fail(fmt.Errorf("manifest of %d bytes: %w (at most %d)", len(desc.Manifest), ErrTooLarge, manifestLimit))
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		return fail(fmt.Errorf("%w: %s is a %q, want an OCI image manifest (%s)", ErrNotPlugin, desc.Digest, desc.MediaType, types.OCIManifestSchema1))
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return fail(fmt.Errorf("%w: manifest: %v", ErrNotPlugin, err))
	}
	if m.Config.Size < 0 || m.Config.Size > configLimit {
		return fail(fmt.Errorf("config of %d bytes: %w (at most %d)", m.Config.Size, ErrTooLarge, configLimit))
	}
	return &Manifest{Digest: desc.Digest, repo: r.Context(), manifest: m}, nil
}

// Blobs reads the plugin m describes: the config and layers checked
// against the layout and the limits, each blob against its digest, the
// plugin against what the agent loads. Nothing is written; errors name
// the manifest's digest reference.
func (c *Client) Blobs(ctx context.Context, m *Manifest) (*Plugin, error) {
	p, err := c.blobs(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", m.repo.Digest(m.Digest.String()), err)
	}
	return p, nil
}

// blobs is Blobs; its errors name no reference.
func (c *Client) blobs(ctx context.Context, m *Manifest) (*Plugin, error) {
	fail := func(err error) (*Plugin, error) { return nil, err }
	opts := c.options(ctx)
	fetch := func(d v1.Descriptor) ([]byte, error) {
		l, err := remote.Layer(m.repo.Digest(d.Digest.String()), opts...)
		if err != nil {
			return nil, explain(err)
		}
		b, err := readBlob(l, d)
		if err != nil {
			return nil, fmt.Errorf("blob %s: %w", d.Digest, explain(err))
		}
		return b, nil
	}
	if m.manifest.Config.MediaType != ConfigMediaType {
		// Refused before any blob is read.
		_, _, _, err := checkLayout(m.manifest, nil, c.limits)
		return fail(err)
	}
	config, err := fetch(m.manifest.Config)
	if err != nil {
		return fail(err)
	}
	module, manifest, tests, err := checkLayout(m.manifest, config, c.limits)
	if err != nil {
		return fail(err)
	}
	p := &Plugin{}
	get := func(d v1.Descriptor) (File, error) {
		b, err := fetch(d)
		return File{Name: d.Annotations[AnnotationTitle], Data: b}, err
	}
	if p.Module, err = get(module); err != nil {
		return fail(err)
	}
	if p.Manifest, err = get(manifest); err != nil {
		return fail(err)
	}
	for _, t := range tests {
		f, err := get(t)
		if err != nil {
			return fail(err)
		}
		p.Tests = append(p.Tests, f)
	}
	if err := p.check(); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrNotPlugin, err))
	}
	return p, nil
}

// Pull reads the plugin at ref (Manifest, then Blobs). It returns the
// plugin and the manifest's digest; nothing is written.
func (c *Client) Pull(ctx context.Context, ref string) (*Plugin, v1.Hash, error) {
	m, err := c.manifest(ctx, ref)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	p, err := c.blobs(ctx, m)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("pull %s: %w", ref, err)
	}
	return p, m.Digest, nil
}

// DigestRef returns ref (a tag or a digest reference) as a digest
// reference, asking the registry for a tag's current manifest digest
// (Resolve).
func (c *Client) DigestRef(ctx context.Context, ref string) (name.Digest, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if d, ok := r.(name.Digest); ok {
		return d, nil
	}
	h, err := c.Resolve(ctx, ref)
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(h.String()), nil
}
