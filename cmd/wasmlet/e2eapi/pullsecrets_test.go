//go:build e2e_apiserver

package e2eapi

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var wasmFlag = flag.String("wasm", "", "testbox.wasm, pushed as a Wasm OCI artifact for the embedded runtime")

// TestImagePullSecrets pulls testbox from the private registry (TLS with
// its own CA, htpasswd) through the API server's objects, as a pod of a
// cluster pulls a team's private image:
//
//  1. a pod naming a kubernetes.io/dockerconfigjson Secret in
//     imagePullSecrets runs; the node reads the Secret with its own
//     credentials, which the Node authorizer allows because a pod bound to
//     the node references it;
//  2. a pod whose ServiceAccount lists the Secret runs;
//  3. a pod with no credentials waits in ErrImagePull with the registry's
//     401 naming the image, then ImagePullBackOff.
func TestImagePullSecrets(t *testing.T) {
	if *registryEnvFlag == "" {
		t.Skip("needs -registry-env (hack/e2e-apiserver.sh starts the registry)")
	}
	env := harness.ReadRegistryEnv(t, *registryEnvFlag)
	image := env["REGISTRY"] + "/private-api-" + flags.Runtime + "/app:1.0"
	harness.Testbox{Env: env, Runtime: flags.Runtime, Wasm: *wasmFlag,
		Tarball: filepath.Join(flags.Hack, "..", "build", "e2e", "images", "testbox.tar")}.Push(t, image)

	dockerConfig, err := os.ReadFile(env["REGISTRY_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	secret := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: dockerConfig},
	}
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &v1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Name: "puller", Namespace: "default"},
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "regcred"}},
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		admin.CoreV1().ServiceAccounts("default").Delete(ctx, "puller", metav1.DeleteOptions{})
		admin.CoreV1().Secrets("default").Delete(ctx, "regcred", metav1.DeleteOptions{})
	})

	a := newAgent(t)
	a.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wasmlet log tail:\n%s", a.LogTail(60))
		}
		a.Stop(t)
	})

	create := func(name string, edit func(*v1.Pod)) {
		t.Helper()
		p := newPod(name, "log", "200ms", name)
		p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = image, v1.PullAlways
		edit(p)
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deletePod(t, name) })
	}
	create("pull-secret", func(p *v1.Pod) {
		p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	})
	create("pull-sa", func(p *v1.Pod) { p.Spec.ServiceAccountName = "puller" })
	create("pull-none", func(*v1.Pod) {})

	running := func(p *v1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "main" && s.State.Running != nil {
				return true
			}
		}
		return false
	}
	waitPod(t, "default", "pull-secret", 2*time.Minute, "running with the imagePullSecret", running)
	waitPod(t, "default", "pull-sa", 2*time.Minute, "running with the ServiceAccount's pull secret", running)

	var msg string
	waitPod(t, "default", "pull-none", 2*time.Minute, "waiting in ErrImagePull", func(p *v1.Pod) bool {
		if w := harness.Waiting(p, "main"); w != nil && w.Reason == "ErrImagePull" {
			msg = w.Message
			return true
		}
		return false
	})
	t.Logf("pull-none: ErrImagePull: %s", msg)
	if !strings.Contains(strings.ToLower(msg), "unauthorized") || !strings.Contains(msg, image) {
		t.Errorf("ErrImagePull message %q: want the registry's 401 (unauthorized) naming %s", msg, image)
	}
	waitPod(t, "default", "pull-none", 2*time.Minute, "waiting in ImagePullBackOff", func(p *v1.Pod) bool {
		w := harness.Waiting(p, "main")
		return w != nil && w.Reason == "ImagePullBackOff" && strings.Contains(w.Message, "Back-off pulling image")
	})
}
