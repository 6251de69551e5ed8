package objects

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newTestLocal is a Local on dir logging to logs, re-reading on every
// lookup.
func newTestLocal(dir string, logs *syncbuf.Buffer) *Local {
	l := NewLocal(dir, hclog.New(&hclog.LoggerOptions{Output: logs}))
	l.interval = 0
	return l
}

const objectsYAML = `
# a comment before the first document
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: shop
data:
  greeting: hello
---
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
data:
  token: c2VjcmV0
stringData:
  user: admin
`

func TestLocalObjects(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "objects.yaml"), objectsYAML)
	writeFile(t, filepath.Join(dir, "more.json"),
		`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"k": "v"}}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a manifest")
	writeFile(t, filepath.Join(dir, ".hidden.yaml"), "this: [is not parsed")
	var logs syncbuf.Buffer
	l := newTestLocal(dir, &logs)
	ctx := context.Background()

	cm, err := l.ConfigMap(ctx, "shop", "web")
	if err != nil || cm.Data["greeting"] != "hello" {
		t.Fatalf("ConfigMap shop/web = %v, %v", cm, err)
	}
	cm.Data["greeting"] = "changed by caller"
	if cm, _ := l.ConfigMap(ctx, "shop", "web"); cm.Data["greeting"] != "hello" {
		t.Error("ConfigMap did not return a copy")
	}
	s, err := l.Secret(ctx, "default", "creds") // namespace defaulted
	if err != nil {
		t.Fatalf("Secret default/creds: %v", err)
	}
	if string(s.Data["token"]) != "secret" || string(s.Data["user"]) != "admin" || s.StringData != nil {
		t.Errorf("Secret data = %q, stringData = %q; want token and user in data", s.Data, s.StringData)
	}
	if s.Type != "Opaque" {
		t.Errorf("Secret type = %q, want Opaque", s.Type)
	}
	if cm, err := l.ConfigMap(ctx, "default", "j"); err != nil || cm.Data["k"] != "v" {
		t.Errorf("ConfigMap from JSON = %v, %v", cm, err)
	}

	_, err = l.ConfigMap(ctx, "default", "web") // wrong namespace
	if !apierrors.IsNotFound(err) {
		t.Fatalf("missing ConfigMap error = %v, want NotFound", err)
	}
	for _, want := range []string{"configmap default/web", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := l.Secret(ctx, "shop", "web"); !apierrors.IsNotFound(err) {
		t.Errorf("a ConfigMap was found as a Secret: %v", err)
	}
	if logs.String() != "" {
		t.Errorf("unexpected logs: %s", logs.String())
	}
}

func TestLocalWithoutDir(t *testing.T) {
	l := NewLocal("", nil)
	ctx := context.Background()
	_, err := l.ConfigMap(ctx, "default", "web")
	if !apierrors.IsNotFound(err) {
		t.Fatalf("error = %v, want NotFound", err)
	}
	for _, want := range []string{"standalone", "configmap default/web", "--pod-objects-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := l.Secret(ctx, "ns", "s"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "secret ns/s") {
		t.Errorf("Secret error = %v", err)
	}

	pod := tokenPod("u1", "")
	l.RegisterPod(pod)
	l.UnregisterPod(pod)
	l.ForgetPod("u1")
	_, err = l.Token(ctx, TokenRequest{Pod: pod})
	if want := "service account token for pod team/pod-u1: this node has no API server (standalone)"; err == nil || err.Error() != want {
		t.Errorf("Token error = %v, want %q", err, want)
	}
	if svcs, err := l.Services(""); svcs != nil || err != nil {
		t.Errorf("Services = %v, %v; want nil, nil", svcs, err)
	}
}

func TestLocalBrokenFileAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dup}\ndata: {from: a}\n")
	writeFile(t, filepath.Join(dir, "b.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dup}\ndata: {from: b}\n"+
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: only-b}\n")
	writeFile(t, filepath.Join(dir, "c-broken.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: [oops\n")
	writeFile(t, filepath.Join(dir, "d-unknown.yml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndat: {typo: x}\n")
	writeFile(t, filepath.Join(dir, "e-kind.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: e}\n")
	var logs syncbuf.Buffer
	l := newTestLocal(dir, &logs)
	ctx := context.Background()

	cm, err := l.ConfigMap(ctx, "default", "dup")
	if err != nil || cm.Data["from"] != "a" {
		t.Fatalf("duplicate ConfigMap = %v, %v; want a.yaml's", cm, err)
	}
	if _, err := l.Secret(ctx, "default", "only-b"); err != nil {
		t.Errorf("b.yaml's Secret: %v", err)
	}
	for _, name := range []string{"c", "d", "e"} {
		if _, err := l.ConfigMap(ctx, "default", name); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s from a bad file: err = %v, want NotFound", name, err)
		}
	}
	out := logs.String()
	for _, want := range []string{
		"c-broken.yaml", "d-unknown.yml", `unknown field "dat"`, "e-kind.yaml", `kind "Pod"`,
		"configmap default/dup", filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs do not mention %s:\n%s", want, out)
		}
	}
	// Logged once: the lookups above re-read nothing unchanged.
	if n := strings.Count(out, "c-broken.yaml"); n != 1 {
		t.Errorf("c-broken.yaml logged %d times, want once:\n%s", n, out)
	}

	// Another file changing re-parses the directory, but the unchanged
	// broken file is not logged again.
	writeFile(t, filepath.Join(dir, "f.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f}\n")
	if _, err := l.ConfigMap(ctx, "default", "f"); err != nil {
		t.Fatalf("new file's ConfigMap: %v", err)
	}
	if n := strings.Count(logs.String(), "c-broken.yaml"); n != 1 {
		t.Errorf("c-broken.yaml logged %d times after another file changed, want once", n)
	}
}

func TestLocalRereadsAfterInterval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cm.yaml")
	writeFile(t, path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: one}\n")
	var logs syncbuf.Buffer
	l := newTestLocal(dir, &logs)
	now := l.now()
	l.now = func() time.Time { return now }
	l.interval = 2 * time.Second
	ctx := context.Background()

	get := func() string {
		t.Helper()
		cm, err := l.ConfigMap(ctx, "default", "web")
		if err != nil {
			t.Fatalf("ConfigMap: %v", err)
		}
		return cm.Data["v"]
	}
	if v := get(); v != "one" {
		t.Fatalf("v = %q, want one", v)
	}
	writeFile(t, path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: second}\n")
	now = now.Add(time.Second)
	if v := get(); v != "one" {
		t.Fatalf("v within the interval = %q, want the cached one", v)
	}
	now = now.Add(time.Second)
	if v := get(); v != "second" {
		t.Fatalf("v after the interval = %q, want second", v)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if _, err := l.ConfigMap(ctx, "default", "web"); !apierrors.IsNotFound(err) {
		t.Errorf("removed ConfigMap: err = %v, want NotFound", err)
	}
}

func TestLocalMissingDir(t *testing.T) {
	var logs syncbuf.Buffer
	dir := filepath.Join(t.TempDir(), "absent")
	l := newTestLocal(dir, &logs)
	for i := 0; i < 2; i++ {
		if _, err := l.ConfigMap(context.Background(), "default", "x"); !apierrors.IsNotFound(err) {
			t.Fatalf("err = %v, want NotFound", err)
		}
	}
	if n := strings.Count(logs.String(), "cannot read --pod-objects-dir"); n != 1 {
		t.Errorf("unreadable dir logged %d times, want once:\n%s", n, logs.String())
	}
}
