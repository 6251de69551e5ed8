//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// TestImageCredentials pushes testbox to a private registry (TLS with its
// own CA, htpasswd) — the image tarball on containerd, testbox.wasm as a
// Wasm OCI artifact on the embedded runtime — and runs an agent whose
// static pods pull it: with an imagePullSecret (a
// kubernetes.io/dockerconfigjson Secret of --pod-objects-dir) the pod
// runs; without one the pull is refused with the registry's 401,
// ErrImagePull then ImagePullBackOff; through a credential provider plugin
// (credprovider, speaking credentialprovider.kubelet.k8s.io/v1) the pod
// runs and the provider was asked for the image.
func TestImageCredentials(t *testing.T) {
	if *registryEnvFlag == "" {
		t.Skip("needs -registry-env (hack/e2e.sh starts the registry)")
	}
	env := readRegistryEnv(t)
	cleanRuntime(t)
	t.Cleanup(func() { cleanRuntime(t) })
	repo := env["REGISTRY"] + "/private-" + flags.Runtime
	secretRef, providedRef := repo+"/secret:1.0", repo+"/provided:1.0"
	tb := harness.Testbox{Env: env, Runtime: flags.Runtime, Wasm: *wasmFlag,
		Tarball: filepath.Join(flags.Hack, "..", "build", "e2e", "images", "testbox.tar")}
	tb.Push(t, secretRef, providedRef)

	a := newAgent(t, "image-creds", flags.Endpoint)
	objects := filepath.Join(a.Dir, "objects")
	bin := filepath.Join(a.Dir, "providers")
	for _, d := range []string{objects, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dockerConfig, err := os.ReadFile(env["REGISTRY_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	writeYAML(t, filepath.Join(objects, "regcred.yaml"), &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: dockerConfig},
	})
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "e2e-credprovider"), "./credprovider")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./credprovider: %v\n%s", err, out)
	}
	providerLog := filepath.Join(a.Dir, "provider.log")
	providers := filepath.Join(a.Dir, "providers.yaml")
	if err := os.WriteFile(providers, []byte(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: e2e-credprovider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["`+repo+`/provided"]
  defaultCacheDuration: 10m
  env:
  - {name: PROVIDER_USER, value: "`+env["REGISTRY_USER"]+`"}
  - {name: PROVIDER_PASSWORD, value: "`+env["REGISTRY_PASSWORD"]+`"}
  - {name: PROVIDER_LOG, value: "`+providerLog+`"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--node-name", nodeName, "--pod-objects-dir", objects,
		"--image-credential-provider-config", providers, "--image-credential-provider-bin-dir", bin}
	if a.endpoint != "" {
		args = append(args, "--container-runtime-endpoint", a.endpoint)
	}
	a.Start(t, append(args, strings.Fields(*agentFlagsFlag)...)...)
	defer a.Stop(t)
	a.diagnose(t)

	pull := func(podName, image string, secrets ...string) {
		c := box("main", "log", "200ms", podName)
		c.Image, c.ImagePullPolicy = image, v1.PullAlways
		p := newPod(podName, v1.RestartPolicyAlways, c)
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
		a.Write(t, podName+".yaml", p)
	}
	pull("with-secret", secretRef, "regcred")
	pull("without-secret", secretRef)
	pull("via-provider", providedRef)

	got := a.waitRunning(t, "with-secret", 2*time.Minute)
	readFileEventually(t, a.containerLog(got, "main", 0), "with-secret 1", 30*time.Second)
	got = a.waitRunning(t, "via-provider", 2*time.Minute)
	readFileEventually(t, a.containerLog(got, "main", 0), "via-provider 1", 30*time.Second)
	if b, err := os.ReadFile(providerLog); err != nil || !strings.Contains(string(b), repo+"/provided\n") {
		t.Errorf("provider log %q, %v: want a request for %s/provided", b, err, repo)
	}

	var pullMsg string
	a.waitPod(t, "without-secret", 2*time.Minute, "waiting ErrImagePull with the registry's refusal", func(p *v1.Pod) bool {
		w := harness.Waiting(p, "main")
		if w != nil && w.Reason == "ErrImagePull" {
			pullMsg = w.Message
			return true
		}
		return false
	})
	t.Logf("without-secret: ErrImagePull: %s", pullMsg)
	if !strings.Contains(strings.ToLower(pullMsg), "unauthorized") || !strings.Contains(pullMsg, secretRef) {
		t.Errorf("ErrImagePull message %q: want the registry's 401 (unauthorized) naming %s", pullMsg, secretRef)
	}
	a.waitPod(t, "without-secret", 2*time.Minute, "waiting ImagePullBackOff", func(p *v1.Pod) bool {
		w := harness.Waiting(p, "main")
		return w != nil && w.Reason == "ImagePullBackOff" && strings.Contains(w.Message, "Back-off pulling image")
	})
}

// writeYAML writes obj to file as YAML.
func writeYAML(t *testing.T, file string, obj any) {
	t.Helper()
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
