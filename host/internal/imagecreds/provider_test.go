package imagecreds

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a credential provider when
// FAKE_PROVIDER is set: it reads the request, appends the image to the
// file $FAKE_CALLS and answers as $FAKE_PROVIDER says, with credentials
// of $FAKE_USER for the image's registry or the key $FAKE_AUTHKEY.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FAKE_PROVIDER"); mode != "" {
		os.Exit(fakeProvider(mode))
	}
	os.Exit(m.Run())
}

func fakeProvider(mode string) int {
	var req struct {
		APIVersion, Kind, Image string
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil || req.Kind != "CredentialProviderRequest" || req.APIVersion != "credentialprovider.kubelet.k8s.io/v1" {
		fmt.Fprintf(os.Stderr, "bad request %+v: %v", req, err)
		return 2
	}
	f, _ := os.OpenFile(os.Getenv("FAKE_CALLS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	fmt.Fprintln(f, req.Image, strings.Join(os.Args[1:], " "))
	f.Close()
	switch mode {
	case "fail":
		fmt.Fprint(os.Stderr, "no credentials for you")
		return 1
	case "garbage":
		fmt.Print("<html>not json</html>")
		return 0
	case "wrong-version":
		fmt.Print(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}`)
		return 0
	}
	authKey := registryOf(req.Image)
	if k := os.Getenv("FAKE_AUTHKEY"); k != "" {
		authKey = k
	}
	resp := map[string]any{
		"apiVersion":   "credentialprovider.kubelet.k8s.io/v1",
		"kind":         "CredentialProviderResponse",
		"cacheKeyType": mode,
		"auth":         map[string]any{authKey: map[string]string{"username": os.Getenv("FAKE_USER"), "password": "pw"}},
	}
	if d := os.Getenv("FAKE_DURATION"); d != "" {
		resp["cacheDuration"] = d
	}
	json.NewEncoder(os.Stdout).Encode(resp)
	return 0
}

// fakeProviders writes a provider config of the given providers (YAML
// fragments after "- name: NAME", each with an env list) and links the test binary into the bin
// dir under each name.
func fakeProviders(t *testing.T, providers map[string]string) (*Providers, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(dir, "calls")
	cfg := "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
	for _, name := range sortedKeys(providers) {
		if err := os.Symlink(self, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
		// The fragment's env list gets the fake's own two variables.
		fragment := strings.Replace(providers[name], "env: [", "env: [{name: FAKE_CALLS, value: "+calls+"}, {name: FAKE_USER, value: "+name+"}, ", 1)
		cfg += "- name: " + name + "\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n" + fragment
	}
	file := filepath.Join(dir, "providers.yaml")
	os.WriteFile(file, []byte(cfg), 0o600)
	p, err := LoadProviders(ProvidersConfig{ConfigFile: file, BinDir: bin})
	if err != nil {
		t.Fatal(err)
	}
	return p, calls
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// countCalls counts the runs of provider name (each is passed its name
// as its argument).
func countCalls(t *testing.T, file, name string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(l, " "+name) {
			n++
		}
	}
	return n
}

// clock sets every provider's clock to a time the test moves.
func clock(p *Providers) *time.Time {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, pr := range p.list {
		pr.now = func() time.Time { return now }
	}
	return &now
}

func TestProviders_Cache(t *testing.T) {
	p, calls := fakeProviders(t, map[string]string{
		"image":    "  matchImages: [image.example.com]\n  defaultCacheDuration: 1m\n  args: [image]\n  env: [{name: FAKE_PROVIDER, value: Image}]\n",
		"registry": "  matchImages: [registry.example.com]\n  defaultCacheDuration: 1m\n  args: [registry]\n  env: [{name: FAKE_PROVIDER, value: Registry}]\n",
		"global":   "  matchImages: ['*.global.example.com']\n  defaultCacheDuration: 1m\n  args: [global]\n  env: [{name: FAKE_PROVIDER, value: Global}, {name: FAKE_AUTHKEY, value: '*.global.example.com'}]\n",
		"short":    "  matchImages: [short.example.com]\n  defaultCacheDuration: 1h\n  args: [short]\n  env: [{name: FAKE_PROVIDER, value: Image}, {name: FAKE_DURATION, value: 10s}]\n",
		"never":    "  matchImages: [never.example.com]\n  defaultCacheDuration: 1h\n  args: [never]\n  env: [{name: FAKE_PROVIDER, value: Image}, {name: FAKE_DURATION, value: 0s}]\n",
		"nodflt":   "  matchImages: [nodflt.example.com]\n  defaultCacheDuration: 0s\n  args: [nodflt]\n  env: [{name: FAKE_PROVIDER, value: Image}]\n",
	})
	now := clock(p)
	ctx := context.Background()
	lookup := func(image, wantUser string) {
		t.Helper()
		creds, err := p.Lookup(ctx, image)
		if err != nil {
			t.Fatalf("Lookup(%s): %v", image, err)
		}
		if len(creds) != 1 || creds[0].Username != wantUser || creds[0].Password != "pw" || creds[0].Source != "credential provider "+wantUser {
			t.Fatalf("Lookup(%s) = %+v, want one credential of %s", image, creds, wantUser)
		}
	}
	expect := func(name string, want int) {
		t.Helper()
		if got := countCalls(t, calls, name); got != want {
			t.Fatalf("provider %s ran %d times, want %d", name, got, want)
		}
	}
	if creds, err := p.Lookup(ctx, "quay.io/app"); err != nil || len(creds) != 0 {
		t.Fatalf("an image no provider matches: %+v, %v", creds, err)
	}

	// Image: per repository, for the default duration.
	lookup("image.example.com/a", "image")
	lookup("image.example.com/a", "image")
	expect("image", 1)
	lookup("image.example.com/b", "image")
	expect("image", 2)
	*now = now.Add(59 * time.Second)
	lookup("image.example.com/a", "image")
	expect("image", 2)
	*now = now.Add(2 * time.Second)
	lookup("image.example.com/a", "image")
	expect("image", 3)

	// Registry: every repository of the registry.
	lookup("registry.example.com/a", "registry")
	lookup("registry.example.com/b/c", "registry")
	expect("registry", 1)

	// Global: every image the provider matches.
	lookup("x.global.example.com/a", "global")
	lookup("y.global.example.com/b", "global")
	expect("global", 1)

	// The response's duration overrides the default; 0 caches nothing,
	// nor does a default of 0 with none in the response.
	lookup("short.example.com/a", "short")
	*now = now.Add(9 * time.Second)
	lookup("short.example.com/a", "short")
	expect("short", 1)
	*now = now.Add(2 * time.Second)
	lookup("short.example.com/a", "short")
	expect("short", 2)
	lookup("never.example.com/a", "never")
	lookup("never.example.com/a", "never")
	expect("never", 2)
	lookup("nodflt.example.com/a", "nodflt")
	lookup("nodflt.example.com/a", "nodflt")
	expect("nodflt", 2)
}

func TestProviders_Failures(t *testing.T) {
	for _, mode := range []struct{ mode, want string }{
		{"fail", "exit status 1: no credentials for you"},
		{"garbage", "the response is not a CredentialProviderResponse"},
		{"wrong-version", `response apiVersion "credentialprovider.kubelet.k8s.io/v1beta1"`},
		{"Elsewhere", `cacheKeyType "Elsewhere"`},
	} {
		t.Run(mode.mode, func(t *testing.T) {
			p, calls := fakeProviders(t, map[string]string{
				"a-bad":  "  matchImages: ['*.example.com']\n  defaultCacheDuration: 1m\n  args: [a-bad]\n  env: [{name: FAKE_PROVIDER, value: " + mode.mode + "}]\n",
				"b-good": "  matchImages: [registry.example.com]\n  defaultCacheDuration: 1m\n  args: [b-good]\n  env: [{name: FAKE_PROVIDER, value: Registry}]\n",
			})
			creds, err := p.Lookup(context.Background(), "registry.example.com/app")
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "credential provider a-bad: image registry.example.com/app") || !strings.Contains(msg, mode.want) || strings.Contains(msg, "b-good") {
				t.Errorf("error %q: want it to name a-bad and the image, say %q, and not name b-good", msg, mode.want)
			}
			if len(creds) != 1 || creds[0].Username != "b-good" {
				t.Errorf("credentials %+v: want b-good's", creds)
			}
			// A failure is not cached: the provider runs again.
			p.Lookup(context.Background(), "registry.example.com/app")
			if n := countCalls(t, calls, "a-bad"); n != 2 {
				t.Errorf("a-bad ran %d times, want 2", n)
			}
		})
	}
}

func TestLoadProviders_Errors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, config, want string }{
		{"kind", "apiVersion: v1\nkind: Pod\nproviders: []\n", `apiVersion "v1" kind "Pod"`},
		{"none", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n", "no providers"},
		{"unknown field", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nprovider: []\n", `unknown field "provider"`},
		{"name", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: ../x\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n", `providers[0] "../x": name must be a file name`},
		{"version", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  apiVersion: v2\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n", `providers[0] "p": apiVersion "v2"`},
		{"no match", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 1m\n", `providers[0] "p": no matchImages`},
		{"bad match", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: ['[a.io']\n  defaultCacheDuration: 1m\n", `matchImages entry "[a.io"`},
		{"no duration", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.io]\n", "defaultCacheDuration is required"},
		{"twice", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n- name: p\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n", `providers[1] "p": name given twice`},
		{"token", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n  tokenAttributes: {serviceAccountTokenAudience: x, requireServiceAccount: true}\n", "tokenAttributes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".yaml")
			os.WriteFile(file, []byte(tc.config), 0o600)
			_, err := LoadProviders(ProvidersConfig{ConfigFile: file, BinDir: dir})
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: want it to name %s and say %q", err, file, tc.want)
			}
		})
	}
}
