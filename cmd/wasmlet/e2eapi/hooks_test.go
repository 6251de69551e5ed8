//go:build e2e_apiserver

package e2eapi

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// TestHookValidator: the validator plugin (plugins/validator, built by
// hack/build-plugins.sh) in the plugin directory of a node joined to the
// cluster refuses a pod of the API server whose container mounts a
// hostPath outside its allow-list. The refusal reaches the API server as
// the kubelet reports a bad container config: the container waits in
// CreateContainerConfigError with the plugin's message, and a Warning
// event Failed carries it. A pod mounting an allowed path runs.
func TestHookValidator(t *testing.T) {
	if *pluginsFlag == "" {
		t.Skip("needs -plugins (hack/e2e-apiserver.sh)")
	}
	a := newAgentOn(t, filepath.Join(flags.Base, "validator-agent"), flags.Endpoint)
	pluginDir := filepath.Join(a.Dir, "plugins")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"validator.wasm", "validator" + abi.ManifestSuffix} {
		b, err := os.ReadFile(filepath.Join(*pluginsFlag, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pluginDir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a.Start(t, "--node-name", *nodeFlag,
		"--kubeconfig", filepath.Join(*clusterFlag, "node-"+*nodeFlag+".kubeconfig"),
		"--port", strconv.Itoa(a.apiPort), "--client-ca-file", filepath.Join(*clusterFlag, "pki", "ca.crt"),
		"--container-runtime-endpoint", flags.Endpoint, "--log-level", "debug",
		"--plugin-dir", pluginDir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wasmlet log tail:\n%s", a.LogTail(60))
		}
		a.Stop(t)
	})

	hostPathPod := func(name, path string) *v1.Pod {
		p := newPod(name, "log", "200ms", name)
		p.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/host", ReadOnly: true}}
		return p
	}
	allowed := filepath.Join("/srv", "wasmlet-e2e-validator")
	if err := os.MkdirAll(allowed, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(allowed) })
	for _, p := range []*v1.Pod{hostPathPod("validated-etc", "/etc"), hostPathPod("validated-srv", allowed)} {
		ctx, cancel := ctxT(30 * time.Second)
		_, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		name := p.Name
		t.Cleanup(func() { deletePod(t, name) })
	}

	const want = "hook plugin validator refused the container: container main mounts host path /etc at /host (hostPath volume host), outside the allowed host paths"
	waitPod(t, "default", "validated-etc", 2*time.Minute, "waiting in CreateContainerConfigError with the validator's message", func(p *v1.Pod) bool {
		w := harness.Waiting(p, "main")
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, want)
	})
	harness.Eventually(t, time.Minute, "a Warning event Failed with the validator's message", func() (bool, string) {
		ctx, cancel := ctxT(5 * time.Second)
		defer cancel()
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "validated-etc").String()})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Type == v1.EventTypeWarning && e.Reason == "Failed" && strings.Contains(e.Message, want) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; ")
	})
	waitPod(t, "default", "validated-srv", 2*time.Minute, "running (its host path is on the allow-list)", func(p *v1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "main" && s.State.Running != nil {
				return true
			}
		}
		return false
	})
}
