package main

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeTarball writes a random image under the tags into dir/file and
// returns its path and image.
func writeTarball(t *testing.T, dir, file string, tags ...string) (string, v1.Image) {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, tag := range tags {
		ref, err := name.ParseReference(tag)
		if err != nil {
			t.Fatal(err)
		}
		refs[ref] = img
	}
	p := filepath.Join(dir, file)
	if err := tarball.MultiRefWriteToFile(p, refs); err != nil {
		t.Fatal(err)
	}
	return p, img
}

func TestPlan(t *testing.T) {
	dir := t.TempDir()
	busybox, _ := writeTarball(t, dir, "busybox.tar", "registry.k8s.io/e2e-test-images/busybox:1.37.0-1")
	agnhost, _ := writeTarball(t, dir, "agnhost.tar", "registry.k8s.io/e2e-test-images/agnhost:2.63.0", "registry.k8s.io/e2e-test-images/agnhost:2.55")
	pause, _ := writeTarball(t, dir, "pause.tar", "registry.k8s.io/pause:3.10.2")
	// Another registry's image on the same path and tag as busybox's.
	clash, _ := writeTarball(t, dir, "clash.tar", "example.com/e2e-test-images/busybox:1.37.0-1")
	tests := []struct {
		name     string
		tarballs []string
		want     []string // destinations in order
		wantErr  string
	}{
		{name: "each tag under its path", tarballs: []string{busybox, agnhost, pause},
			want: []string{"127.0.0.1:5000/e2e-test-images/busybox:1.37.0-1", "127.0.0.1:5000/e2e-test-images/agnhost:2.55",
				"127.0.0.1:5000/e2e-test-images/agnhost:2.63.0", "127.0.0.1:5000/pause:3.10.2"}},
		{name: "two images on one path and tag", tarballs: []string{busybox, pause, clash},
			wantErr: "busybox.tar (registry.k8s.io/e2e-test-images/busybox:1.37.0-1) and " + clash + " (example.com/e2e-test-images/busybox:1.37.0-1) would both be pushed as 127.0.0.1:5000/e2e-test-images/busybox:1.37.0-1"},
		{name: "the same tarball twice", tarballs: []string{pause, pause}, wantErr: "would both be pushed as 127.0.0.1:5000/pause:3.10.2"},
		{name: "not a tarball", tarballs: []string{filepath.Join(dir, "missing.tar")}, wantErr: "missing.tar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plan("127.0.0.1:5000", tt.tarballs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("plan: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var dests []string
			for _, p := range got {
				dests = append(dests, p.dest.String())
			}
			if strings.Join(dests, " ") != strings.Join(tt.want, " ") {
				t.Errorf("destinations %v, want %v", dests, tt.want)
			}
		})
	}
}

// The images arrive under their paths on a TLS registry whose CA is given;
// a refused plan pushes nothing.
func TestPush(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New())
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	ref, err := name.ParseReference(host + "/e2e-test-images/busybox:1.37.0-1")
	if err != nil {
		t.Fatal(err)
	}
	busybox, img := writeTarball(t, dir, "busybox.tar", "registry.k8s.io/e2e-test-images/busybox:1.37.0-1")
	clash, _ := writeTarball(t, dir, "clash.tar", "example.com/e2e-test-images/busybox:1.37.0-1")

	if _, err := Push(context.Background(), Config{Registry: host, CA: ca, Keychain: authn.NewMultiKeychain(), Tarballs: []string{clash, busybox}}); err == nil {
		t.Fatal("a plan with two images on one tag pushed")
	}
	tr := srv.Client().Transport
	if _, err := remote.Head(ref, remote.WithTransport(tr)); err == nil {
		t.Fatal("the refused plan pushed an image")
	}

	pushed, err := Push(context.Background(), Config{Registry: host, CA: ca, Tarballs: []string{busybox}})
	if err != nil || len(pushed) != 1 {
		t.Fatalf("push: %v, %d pushed", err, len(pushed))
	}
	got, err := remote.Image(ref, remote.WithTransport(tr))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if cfg, _ := got.ConfigName(); cfg != want {
		t.Errorf("pushed image's config %s, want %s", cfg, want)
	}
	if _, err := Push(context.Background(), Config{Registry: host, Tarballs: []string{busybox}}); err == nil {
		t.Error("a push without the registry's CA succeeded")
	}
}
