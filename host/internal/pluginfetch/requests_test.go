package pluginfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
	"github.com/wasmlet/wasmlet/host/internal/pluginsign"
	"github.com/wasmlet/wasmlet/host/internal/pluginsign/signtest"
)

// countingRegistry is go-containerregistry's in-memory registry behind
// HTTP basic authentication, as docker-registry with htpasswd answers
// (401 with a Basic challenge, also to /v2/), recording every request as
// "METHOD PATH STATUS", digests replaced by the names given to them.
type countingRegistry struct {
	host string
	srv  *httptest.Server
	// handler serves the registry; restart serves it again.
	handler http.Handler

	mu       sync.Mutex
	password string
	reqs     []string
	names    map[string]string // digest → name in the record
}

const (
	registryUser     = "wasmlet"
	registryPassword = "secret"
)

// setPassword changes the password the registry accepts.
func (r *countingRegistry) setPassword(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.password = p
}

func newCountingRegistry(t *testing.T) *countingRegistry {
	t.Helper()
	r := &countingRegistry{names: map[string]string{}, password: registryPassword}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		r.mu.Lock()
		password := r.password
		r.mu.Unlock()
		if u, p, ok := req.BasicAuth(); !ok || u != registryUser || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			rec.WriteHeader(http.StatusUnauthorized)
		} else {
			inner.ServeHTTP(rec, req)
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.Path+" "+fmt.Sprint(rec.status))
		r.mu.Unlock()
	})
	r.srv = httptest.NewServer(r.handler)
	t.Cleanup(func() { r.srv.Close() })
	u, _ := url.Parse(r.srv.URL)
	r.host = u.Host
	return r
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// restart serves the registry again, with its content, at the address it
// had before it was closed.
func (r *countingRegistry) restart(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", r.host)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewUnstartedServer(r.handler)
	r.srv.Listener.Close()
	r.srv.Listener = l
	r.srv.Start()
}

// name gives digest (sha256:HEX) a name in the record; its tag form
// (sha256-HEX) is named NAME-tag.
func (r *countingRegistry) name(digest, n string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[digest] = n
	r.names[strings.Replace(digest, ":", "-", 1)] = n + "-tag"
}

// take returns the requests recorded since the last take.
func (r *countingRegistry) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.reqs))
	for i, s := range r.reqs {
		for d, n := range r.names {
			s = strings.ReplaceAll(s, d, n)
		}
		out[i] = s
	}
	r.reqs = nil
	return out
}

// rotatingKeychain returns the password it holds now for any resource.
type rotatingKeychain struct {
	mu       sync.Mutex
	password string
}

func (k *rotatingKeychain) set(p string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.password = p
}

func (k *rotatingKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &authn.Basic{Username: registryUser, Password: k.password}, nil
}

// staticKeychain returns the registry's credentials for any resource.
type staticKeychain struct{ user, password string }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: k.user, Password: k.password}, nil
}

// TestFetcher_Resolve_requests pins the requests a node makes to pull one
// signed plugin by tag from a registry with basic authentication, with the
// signature verifier the agent uses: one /v2/ challenge, the manifest read
// once by tag, each blob once, the signature's manifest and payload — and
// a later resolution of the unchanged tag is one HEAD. A missing
// signature, a registry that refuses the credentials and one that is
// down still fail with the errors that say so.
func TestFetcher_Resolve_requests(t *testing.T) {
	ctx := context.Background()
	reg := newCountingRegistry(t)
	kc := staticKeychain{registryUser, registryPassword}
	dir := t.TempDir()
	keyFile, pubFile := signtest.KeyPair(t, "pw")

	publisher, err := pluginoci.New(pluginoci.Config{Keychain: kc})
	if err != nil {
		t.Fatal(err)
	}
	pushSigned := func(repo string, sign bool) string {
		d := pushWith(t, publisher, reg.host+"/"+repo+":1", moduleV1, "1.0.0", "")
		if sign {
			k, err := pluginsign.LoadPrivateKey(keyFile, []byte("pw"))
			if err != nil {
				t.Fatal(err)
			}
			at, _ := pluginoci.ParseReference(reg.host + "/" + repo + "@" + d.String())
			if _, err := pluginsign.Sign(ctx, pluginsign.SignConfig{Ref: at.(name.Digest), Key: k, Remote: publisher.RemoteOptions(ctx)}); err != nil {
				t.Fatal(err)
			}
		}
		return d.String()
	}

	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("apiVersion: wasmlet.dev/v1alpha1\nkind: PluginVerificationPolicy\nrequireSignature: true\nverification:\n  keys: ["+pubFile+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy, err := pluginsign.LoadNodePolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	// node is a fresh node: its client, verifier and fetcher, as the agent
	// makes them (host/agent/plugins.go), with the credentials given.
	node := func(kc authn.Keychain) *Fetcher {
		client, err := pluginoci.New(pluginoci.Config{Keychain: kc})
		if err != nil {
			t.Fatal(err)
		}
		v, err := pluginsign.New(pluginsign.Config{Registry: client, Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := newFetcher(t, Config{Dir: t.TempDir(), Client: client, Verifier: v, PolicyFile: policyFile})
		return f
	}

	digest := pushSigned("signed", true)
	reg.name(digest, "DIGEST")
	signed := node(kc)
	path, ref := writeRef(t, t.TempDir(), reg.host+"/signed:1", "")

	t.Run("signed plugin", func(t *testing.T) {
		f := signed
		blobs := artifactBlobs(t, publisher, reg.host+"/signed@"+digest, true)
		sigBlobs := artifactBlobs(t, publisher, reg.host+"/signed:"+strings.Replace(digest, ":", "-", 1)+".sig", false)
		reg.take()

		res, err := f.Resolve(ctx, path, ref)
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != digest || !res.Verified {
			t.Fatalf("Resolve = digest %s verified %v, want %s verified", res.Digest, res.Verified, digest)
		}
		want := []string{
			"GET /v2/ 401",
			"GET /v2/signed/manifests/1 200",
		}
		for _, b := range blobs {
			want = append(want, "GET /v2/signed/blobs/"+b+" 200")
		}
		want = append(want, "GET /v2/signed/manifests/DIGEST-tag.sig 200")
		for _, b := range sigBlobs {
			want = append(want, "GET /v2/signed/blobs/"+b+" 200")
		}
		// Blobs in any order; each once.
		got := reg.take()
		sort.Strings(got[2:])
		sort.Strings(want[2:])
		if !reflect.DeepEqual(got, want) {
			t.Errorf("requests of one pull:\n got  %q\n want %q", got, want)
		}

		// The round the new reference asks for: nothing to do.
		f.Stamps(map[string]abi.Manifest{path: ref})
		f.resolveRound(ctx, true)
		if got := reg.take(); len(got) != 0 {
			t.Errorf("requests of the round right after the pull: %q, want none", got)
		}
		// A later round: the tag is resolved by one HEAD.
		f.ResolveAll(ctx)
		if got, want := reg.take(), []string{"HEAD /v2/signed/manifests/1 200"}; !reflect.DeepEqual(got, want) {
			t.Errorf("requests of a later resolution:\n got  %q\n want %q", got, want)
		}
	})

	t.Run("unsigned plugin", func(t *testing.T) {
		pushSigned("unsigned", false)
		reg.take()
		f := node(kc)
		path, ref := writeRef(t, t.TempDir(), reg.host+"/unsigned:1", "")
		_, err := f.Resolve(ctx, path, ref)
		if !errors.Is(err, pluginsign.ErrNoSignature) {
			t.Fatalf("Resolve of an unsigned plugin = %v, want ErrNoSignature", err)
		}
		if got := fetchErrors(f, ReasonVerify); got != 1 {
			t.Errorf("verify errors = %v, want 1", got)
		}
	})

	t.Run("refused credentials", func(t *testing.T) {
		f := node(staticKeychain{registryUser, "wrong"})
		path, ref := writeRef(t, t.TempDir(), reg.host+"/signed:1", "")
		_, err := f.Resolve(ctx, path, ref)
		if !errors.Is(err, pluginoci.ErrUnauthorized) {
			t.Fatalf("Resolve with wrong credentials = %v, want ErrUnauthorized", err)
		}
		if got := fetchErrors(f, ReasonResolve); got != 1 {
			t.Errorf("resolve errors = %v, want 1", got)
		}
	})

	// The credentials change (a credential helper's new token): the
	// transport reused since the pull sends the new ones at once.
	t.Run("rotated credentials", func(t *testing.T) {
		kc := &rotatingKeychain{password: registryPassword}
		f := node(kc)
		path, ref := writeRef(t, t.TempDir(), reg.host+"/signed:1", "")
		f.Stamps(map[string]abi.Manifest{path: ref})
		if _, err := f.Resolve(ctx, path, ref); err != nil {
			t.Fatal(err)
		}
		reg.setPassword("rotated")
		defer reg.setPassword(registryPassword)
		kc.set("rotated")
		reg.take()
		f.ResolveAll(ctx)
		if st := f.Status(path); st.Error != "" || st.Digest != digest {
			t.Errorf("Status after the credentials changed = %+v, want digest %s and no error", st, digest)
		}
		if got, want := reg.take(), []string{"HEAD /v2/signed/manifests/1 200"}; !reflect.DeepEqual(got, want) {
			t.Errorf("requests after the credentials changed:\n got  %q\n want %q", got, want)
		}
	})

	// The registry restarts under the node whose transport was
	// authenticated before: while it is down the round fails, the plugin
	// kept; once it is back the transport serves again, one HEAD.
	t.Run("registry restart", func(t *testing.T) {
		reg.srv.Close()
		signed.ResolveAll(ctx)
		if got := fetchErrors(signed, ReasonResolve); got != 1 {
			t.Errorf("resolve errors = %v, want 1", got)
		}
		if st := signed.Status(path); !strings.Contains(st.Error, "connection refused") || st.Digest != digest {
			t.Errorf("Status = %+v, want the refused connection and digest %s kept", st, digest)
		}
		reg.restart(t)
		reg.take()
		signed.ResolveAll(ctx)
		if st := signed.Status(path); st.Error != "" || st.Digest != digest {
			t.Errorf("Status after the restart = %+v, want digest %s and no error", st, digest)
		}
		if got, want := reg.take(), []string{"HEAD /v2/signed/manifests/1 200"}; !reflect.DeepEqual(got, want) {
			t.Errorf("requests after the restart:\n got  %q\n want %q", got, want)
		}
	})
}

// artifactBlobs lists the blobs of the manifest at ref — its layers, and
// with config its config — as the publisher reads them.
func artifactBlobs(t *testing.T, c *pluginoci.Client, ref string, config bool) []string {
	t.Helper()
	r, err := pluginoci.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r, c.RemoteOptions(context.Background())...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if config {
		out = append(out, m.Config.Digest.String())
	}
	for _, l := range m.Layers {
		out = append(out, l.Digest.String())
	}
	return out
}
