//go:build e2e_apiserver

package e2eapi

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

// saDir is where the API server's ServiceAccount admission mounts a pod's
// kube-api-access volume.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// allLogs is every log file of the container so far, concatenated.
func allLogs(a *agent, p *v1.Pod, container string) string {
	files, _ := filepath.Glob(fmt.Sprintf("%s/%s_%s_%s/%s/*.log", a.Logs, p.Namespace, p.Name, p.UID, container))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

// waitLog waits until the container's log has a line containing want.
func waitLog(t *testing.T, a *agent, p *v1.Pod, container, want string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("pod %s log line %q", p.Name, want), func() (bool, string) {
		l := allLogs(a, p, container)
		return strings.Contains(l, want), harness.Tail(l, 5)
	})
}

// apiserverURL is the API server's address, from cluster.sh's env file.
func apiserverURL(t *testing.T) string {
	f, err := os.Open(filepath.Join(*clusterFlag, "env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "APISERVER="); ok {
			return v
		}
	}
	t.Fatal("no APISERVER in the cluster's env file")
	return ""
}

func createPod(t *testing.T, p *v1.Pod) {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if _, err := admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePod(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
		return
	}
	waitGone(t, "default", name, 90*time.Second)
}

// A pod as `kubectl run` makes it (the default ServiceAccount, nothing
// else) runs with the API server's projected kube-api-access volume: the
// bound token, kube-root-ca.crt and the namespace. On containerd the
// container calls the API server with the token and is known as its
// ServiceAccount.
func testServiceAccountToken(t *testing.T, a *agent) {
	var p *v1.Pod
	if flags.Runtime == "containerd" {
		// Host network: there is no kube-proxy to reach the kubernetes
		// Service, so the pod calls the API server where it listens.
		p = newPod("whoami", "cat", saDir+"/namespace", ";", "echo", ";", "whoami", apiserverURL(t), ";", "sleep", "inf")
		p.Spec.HostNetwork = true
	} else {
		p = newPod("whoami", "cat", saDir+"/namespace", ";", "echo", ";", "cat", saDir+"/ca.crt", ";", "sleep", "inf")
	}
	createPod(t, p)
	got := waitPod(t, "default", "whoami", 90*time.Second, "Running", harness.Running)
	mounted := false
	for _, vm := range got.Spec.Containers[0].VolumeMounts {
		mounted = mounted || vm.MountPath == saDir
	}
	if !mounted {
		t.Fatalf("the API server added no kube-api-access mount: %+v", got.Spec.Containers[0].VolumeMounts)
	}
	waitLog(t, a, got, "main", "default", 30*time.Second)
	if flags.Runtime == "containerd" {
		waitLog(t, a, got, "main", "user=system:serviceaccount:default:default", 30*time.Second)
	} else {
		waitLog(t, a, got, "main", "BEGIN CERTIFICATE", 30*time.Second)
	}
	deletePod(t, "whoami")
}

// A ConfigMap and a Secret as env (keyRef and envFrom) and as volumes;
// updating them changes the files in the running container in place.
func testConfigMapAndSecret(t *testing.T, a *agent) {
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "default"}, Data: map[string]string{"greeting": "hello", "color": "blue"}}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret", Namespace: "default"}, Data: map[string][]byte{"password": []byte("s3cret-1")}}
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := newPod("data", "env", "GREETING", "PASSWORD", "CFG_color", "DERIVED", ";",
		"watch", "500ms", "/etc/app/greeting", "/etc/secret/password")
	c := &p.Spec.Containers[0]
	c.Env = []v1.EnvVar{
		{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Key: "greeting"}}},
		{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app-secret"}, Key: "password"}}},
		{Name: "DERIVED", Value: "$(GREETING)-world"},
	}
	c.EnvFrom = []v1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}, {Name: "sec", MountPath: "/etc/secret"}}
	p.Spec.Volumes = []v1.Volume{
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "app-secret"}}},
	}
	createPod(t, p)
	got := waitPod(t, "default", "data", 90*time.Second, "Running", harness.Running)
	for _, want := range []string{"GREETING=hello", "PASSWORD=s3cret-1", "CFG_color=blue", "DERIVED=hello-world", "/etc/app/greeting=hello", "/etc/secret/password=s3cret-1"} {
		waitLog(t, a, got, "main", want, 30*time.Second)
	}

	// Let the syncs that follow the container's start pass, so the figure
	// below is the volume manager's refresh, not a sync that happened to
	// come next.
	time.Sleep(3 * time.Second)
	cm.Data["greeting"] = "bonjour"
	sec.Data["password"] = []byte("s3cret-2")
	updated := time.Now()
	if _, err := admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("default").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kubelet's bound is its sync period plus its cache's TTL (about
	// two minutes); the volume manager's resync is 10 s.
	waitLog(t, a, got, "main", "/etc/app/greeting=bonjour", 3*time.Minute)
	waitLog(t, a, got, "main", "/etc/secret/password=s3cret-2", time.Minute)
	fmt.Printf("FIGURE e2eapi %s: ConfigMap and Secret update seen inside the container after %v (volume resync period 10 s)\n", flags.Runtime, time.Since(updated).Round(100*time.Millisecond))
	deletePod(t, "data")
	admin.CoreV1().ConfigMaps("default").Delete(ctx, "app-config", metav1.DeleteOptions{})
	admin.CoreV1().Secrets("default").Delete(ctx, "app-secret", metav1.DeleteOptions{})
}

// One projected volume combining a ConfigMap, a Secret, the downward API
// and a service-account token with its own audience.
func testProjected(t *testing.T, a *agent) {
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "proj-cm", Namespace: "default"}, Data: map[string]string{"a": "from-configmap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "proj-sec", Namespace: "default"}, StringData: map[string]string{"b": "from-secret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := newPod("projected", "cat", "/all/token", ";", "echo", ";", "watch", "1s", "/all/cm/a", "/all/sec/b", "/all/labels", "/all/name")
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "all", MountPath: "/all"}}
	p.Spec.Volumes = []v1.Volume{{Name: "all", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o440)),
		Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-cm"}, Items: []v1.KeyToPath{{Key: "a", Path: "cm/a"}}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj-sec"}, Items: []v1.KeyToPath{{Key: "b", Path: "sec/b"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			}}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "wasmlet-e2e", ExpirationSeconds: ptr.To(int64(3600))}},
		},
	}}}}
	createPod(t, p)
	got := waitPod(t, "default", "projected", 90*time.Second, "Running", harness.Running)
	for _, want := range []string{"eyJ", "/all/cm/a=from-configmap", "/all/sec/b=from-secret", `/all/labels=app="projected"`, "/all/name=projected"} {
		waitLog(t, a, got, "main", want, 30*time.Second)
	}
	// Labels changed through the API reach the downward-API file.
	patch := []byte(`{"metadata":{"labels":{"tier":"gold"}}}`)
	if _, err := admin.CoreV1().Pods("default").Patch(ctx, "projected", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, a, got, "main", `/all/labels=app="projected"\ntier="gold"`, 2*time.Minute)
	deletePod(t, "projected")
	admin.CoreV1().ConfigMaps("default").Delete(ctx, "proj-cm", metav1.DeleteOptions{})
	admin.CoreV1().Secrets("default").Delete(ctx, "proj-sec", metav1.DeleteOptions{})
}

// A missing optional key leaves the variable unset and the pod runs; a
// missing required key keeps the container in CreateContainerConfigError
// with a message naming the key; a missing ConfigMap behind a volume keeps
// the pod in ContainerCreating with a FailedMount event naming it.
func testMissingKeys(t *testing.T, a *agent) {
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "partial", Namespace: "default"}, Data: map[string]string{"present": "yes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := func(key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "partial"}, Key: key, Optional: ptr.To(optional)}}
	}
	opt := newPod("optional", "env", "PRESENT", "ABSENT", ";", "sleep", "inf")
	opt.Spec.Containers[0].Env = []v1.EnvVar{{Name: "PRESENT", ValueFrom: ref("present", false)}, {Name: "ABSENT", ValueFrom: ref("absent", true)}}
	req := newPod("required", "sleep", "inf")
	req.Spec.Containers[0].Env = []v1.EnvVar{{Name: "ABSENT", ValueFrom: ref("absent", false)}}
	vol := newPod("novolume", "sleep", "inf")
	vol.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	vol.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "does-not-exist"}}}}}
	for _, p := range []*v1.Pod{opt, req, vol} {
		createPod(t, p)
	}
	got := waitPod(t, "default", "optional", 90*time.Second, "Running", harness.Running)
	waitLog(t, a, got, "main", "PRESENT=yes", 30*time.Second)
	waitLog(t, a, got, "main", "ABSENT=\n", 30*time.Second)
	waitPod(t, "default", "required", 90*time.Second, "waiting in CreateContainerConfigError naming the key", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "absent") && strings.Contains(w.Message, "partial") {
				return true
			}
		}
		return false
	})
	waitPod(t, "default", "novolume", 90*time.Second, "waiting in ContainerCreating", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
				return true
			}
		}
		return false
	})
	harness.Eventually(t, 60*time.Second, "FailedMount event naming the ConfigMap", func() (bool, string) {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=novolume,reason=FailedMount"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, `"does-not-exist"`) && strings.Contains(e.Message, `volume "cfg"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	for _, n := range []string{"optional", "required", "novolume"} {
		deletePod(t, n)
	}
	admin.CoreV1().ConfigMaps("default").Delete(ctx, "partial", metav1.DeleteOptions{})
}
