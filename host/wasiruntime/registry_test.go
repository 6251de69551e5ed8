package wasiruntime

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

// TestImageService_PullImage_registry pulls testbox, pushed as a Wasm
// artifact to a registry on loopback (plain HTTP) that wants basic
// credentials, with and without the request's AuthConfig, and runs it.
func TestImageService_PullImage_registry(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/private/testbox:1.0"
	mod, err := os.ReadFile(testboxWasm)
	if err != nil {
		t.Fatal(err)
	}
	art, err := mutate.AppendLayers(empty.Image, static.NewLayer(mod, image.ModuleMediaType))
	if err != nil {
		t.Fatal(err)
	}
	art = mutate.ConfigMediaType(mutate.MediaType(art, types.OCIManifestSchema1), image.ConfigMediaType)
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, art, remote.WithAuth(&authn.Basic{Username: "alice", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}

	h := newHarness(t)
	ctx := context.Background()
	spec := &runtimeapi.ImageSpec{Image: ref}
	_, err = h.is.PullImage(ctx, spec, nil, nil)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "authentication required") {
		t.Fatalf("PullImage without credentials = %v, want Unauthenticated with the registry's message", err)
	}
	_, err = h.is.PullImage(ctx, spec, &runtimeapi.AuthConfig{Username: "alice", Password: "wrong"}, nil)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("PullImage with a wrong password = %v, want Unauthenticated", err)
	}
	id, err := h.is.PullImage(ctx, spec, &runtimeapi.AuthConfig{Username: "alice", Password: "s3cret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := h.is.ImageStatus(ctx, spec, false); err != nil || st.Image == nil || st.Image.Id != id {
		t.Fatalf("ImageStatus after the pull = %v, %v; want %s", st, err, id)
	}
	// A pulled image is pulled again (the tag may have moved, the
	// credentials are checked), unlike an imported one.
	if _, err := h.is.PullImage(ctx, spec, nil, nil); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("second PullImage without credentials = %v, want Unauthenticated", err)
	}
	sb, sbCfg := h.sandbox(t, "pulled", nil)
	c := h.run(t, sb, sbCfg, "app", []string{"exit", "7"}, func(c *runtimeapi.ContainerConfig) { c.Image = spec })
	if st := h.waitExit(t, c, time.Minute); st.ExitCode != 7 || st.ImageRef != id {
		t.Errorf("the pulled image's container: exit %d, image %s; want 7, %s", st.ExitCode, st.ImageRef, id)
	}
}
