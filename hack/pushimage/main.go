// Command pushimage pushes image tarballs (the `docker save` format
// hack/mkimage writes) to a registry, each under the repository path and
// tag its tarball names, with the registry's host in place of the one it
// names: registry.k8s.io/e2e-test-images/busybox:1.37.0-1 goes to
// HOST:PORT/e2e-test-images/busybox:1.37.0-1. hack/conformance.sh uses it
// to serve its offline-built images to a containerd that mirrors
// registry.k8s.io through that registry.
//
//	pushimage -registry HOST:PORT [-ca CA.pem] TARBALL...
//
// Credentials come from the docker config ($DOCKER_CONFIG/config.json,
// which hack/registry/up.sh writes). Two tarballs that would land on one
// path and tag are refused before anything is pushed.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Config is what a push needs.
type Config struct {
	// Registry is the destination's host:port.
	Registry string
	// CA is the PEM file of the registry's certificate authority (empty:
	// the system's roots).
	CA string
	// Keychain gives the registry's credentials.
	Keychain authn.Keychain
	// Tarballs are the images to push.
	Tarballs []string
}

// push is one tag of one tarball and where it goes.
type push struct {
	tarball string
	source  name.Tag // the tag the tarball names
	dest    name.Tag // the same repository path and tag on the registry
}

func main() {
	cfg := Config{Keychain: authn.DefaultKeychain}
	flag.StringVar(&cfg.Registry, "registry", "", "the registry's host:port")
	flag.StringVar(&cfg.CA, "ca", "", "the registry's CA certificate (PEM)")
	flag.Parse()
	cfg.Tarballs = flag.Args()
	if cfg.Registry == "" || len(cfg.Tarballs) == 0 {
		fmt.Fprintln(os.Stderr, "usage: pushimage -registry HOST:PORT [-ca CA.pem] TARBALL...")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	pushed, err := Push(ctx, cfg)
	for _, p := range pushed {
		fmt.Printf("%s: %s as %s\n", p.tarball, p.source, p.dest)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pushimage:", err)
		os.Exit(1)
	}
}

// plan lists every tag of every tarball with its destination on registry,
// in tarball order; two tags that would land on one destination are an
// error naming both tarballs.
func plan(registry string, tarballs []string) ([]push, error) {
	var out []push
	seen := map[string]push{}
	for _, tb := range tarballs {
		m, err := tarball.LoadManifest(opener(tb))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tb, err)
		}
		var tags []string
		for _, d := range m {
			tags = append(tags, d.RepoTags...)
		}
		if len(tags) == 0 {
			return nil, fmt.Errorf("%s: the tarball names no image (no RepoTags)", tb)
		}
		sort.Strings(tags)
		for _, t := range tags {
			src, err := name.NewTag(t)
			if err != nil {
				return nil, fmt.Errorf("%s: tag %q: %w", tb, t, err)
			}
			dest, err := name.NewTag(registry + "/" + src.RepositoryStr() + ":" + src.TagStr())
			if err != nil {
				return nil, fmt.Errorf("%s: tag %q on %s: %w", tb, t, registry, err)
			}
			p := push{tarball: tb, source: src, dest: dest}
			if prev, ok := seen[dest.String()]; ok {
				return nil, fmt.Errorf("%s (%s) and %s (%s) would both be pushed as %s", prev.tarball, prev.source, tb, src, dest)
			}
			seen[dest.String()] = p
			out = append(out, p)
		}
	}
	return out, nil
}

// Push pushes every tarball's images to the registry (see the command's
// documentation) and returns what it pushed; nothing is pushed when the
// plan has two images on one path and tag.
func Push(ctx context.Context, cfg Config) ([]push, error) {
	pushes, err := plan(cfg.Registry, cfg.Tarballs)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CA != "" {
		pem, err := os.ReadFile(cfg.CA)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s: no PEM certificate in it", cfg.CA)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	kc := cfg.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain()
	}
	var done []push
	for _, p := range pushes {
		src := p.source
		img, err := tarball.Image(opener(p.tarball), &src)
		if err != nil {
			return done, fmt.Errorf("%s: %s: %w", p.tarball, p.source, err)
		}
		if err := remote.Write(p.dest, img, remote.WithContext(ctx), remote.WithTransport(tr), remote.WithAuthFromKeychain(kc)); err != nil {
			return done, fmt.Errorf("%s: push %s: %w", p.tarball, p.dest, err)
		}
		done = append(done, p)
	}
	return done, ctx.Err()
}

// opener opens the tarball at path.
func opener(path string) tarball.Opener {
	return func() (io.ReadCloser, error) { return os.Open(path) }
}
