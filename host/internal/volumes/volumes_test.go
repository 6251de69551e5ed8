package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/objects"
)

// fakeObjects is an in-memory objects.Source and objects.Tokens.
type fakeObjects struct {
	cms        map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	registered map[string]bool
	token      string
	forgot     []string
}

func (f *fakeObjects) RegisterPod(p *v1.Pod)   { f.registered[p.Name] = true }
func (f *fakeObjects) UnregisterPod(p *v1.Pod) { delete(f.registered, p.Name) }
func (f *fakeObjects) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
}
func (f *fakeObjects) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}
func (f *fakeObjects) Token(_ context.Context, req objects.TokenRequest) (objects.Token, error) {
	if f.token == "" {
		return objects.Token{}, errors.New("no token for you")
	}
	return objects.Token{Token: f.token + ":" + req.Audience}, nil
}
func (f *fakeObjects) ForgetPod(uid string) { f.forgot = append(f.forgot, uid) }

func newFake() *fakeObjects {
	return &fakeObjects{
		cms:        map[string]*v1.ConfigMap{"ns/cm": {Data: map[string]string{"k1": "v1", "k2": "v2"}, BinaryData: map[string][]byte{"bin": {0, 1}}}},
		secrets:    map[string]*v1.Secret{"ns/sec": {Data: map[string][]byte{"pw": []byte("hunter2")}}},
		registered: map[string]bool{},
		token:      "tok",
	}
}

func newManager(t *testing.T, f *fakeObjects) *Manager {
	t.Helper()
	root := t.TempDir()
	m, err := New(Config{RootDir: root, Objects: f, Tokens: f})
	if err != nil {
		t.Fatal(err)
	}
	// Secret and projected volumes are tmpfs mounts (as root).
	t.Cleanup(func() { UnmountUnder(root) })
	return m
}

func testPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"app": "x"}},
		Spec:       v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
}

func read(t *testing.T, m *Manager, p *v1.Pod, vol, file string) string {
	t.Helper()
	dir, _, err := m.Path(p, vol)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatalf("%s/%s: %v", vol, file, err)
	}
	return string(b)
}

func TestMount_APIDataVolumes(t *testing.T) {
	f := newFake()
	m := newManager(t, f)
	p := testPod(
		v1.Volume{Name: "all-keys", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		v1.Volume{Name: "items", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, DefaultMode: ptr.To(int32(0o400)),
			Items: []v1.KeyToPath{{Key: "k1", Path: "dir/one"}, {Key: "k2", Path: "two", Mode: ptr.To(int32(0o600))}}}}},
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		v1.Volume{Name: "down", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		}}}},
		v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: []v1.KeyToPath{{Key: "k1", Path: "k1"}}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "aud"}},
		}}}},
	)
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if !f.registered["p"] {
		t.Error("pod not registered with the object source")
	}
	for _, c := range []struct{ vol, file, want string }{
		{"all-keys", "k1", "v1"}, {"all-keys", "k2", "v2"}, {"all-keys", "bin", "\x00\x01"},
		{"items", "dir/one", "v1"}, {"items", "two", "v2"},
		{"sec", "pw", "hunter2"},
		{"down", "labels", `app="x"`}, {"down", "mem", "64"},
		{"proj", "k1", "v1"}, {"proj", "pw", "hunter2"}, {"proj", "ns", "ns"}, {"proj", "token", "tok:aud"},
	} {
		if got := read(t, m, p, c.vol, c.file); got != c.want {
			t.Errorf("%s/%s = %q, want %q", c.vol, c.file, got, c.want)
		}
	}
	dir, ro, _ := m.Path(p, "items")
	if !ro {
		t.Error("a configMap volume is not read-only")
	}
	for file, want := range map[string]os.FileMode{"dir/one": 0o400, "two": 0o600} {
		if fi, err := os.Stat(filepath.Join(dir, file)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("items/%s mode %v, %v; want %v", file, fi.Mode().Perm(), err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "k1")); !os.IsNotExist(err) {
		t.Errorf("items holds k1, which no item names: %v", err)
	}

	// An update of the object and of the pod's labels is written by the
	// refresh.
	f.cms["ns/cm"] = &v1.ConfigMap{Data: map[string]string{"k1": "new"}}
	p2 := p.DeepCopy()
	p2.Labels["tier"] = "gold"
	if err := m.Mount(context.Background(), p2); err == nil || !strings.Contains(err.Error(), `volume "items"`) || !strings.Contains(err.Error(), "k2") {
		t.Errorf("items with k2 gone: err %v, want one naming the volume and the key", err)
	}
	if got := read(t, m, p2, "all-keys", "k1"); got != "new" {
		t.Errorf("all-keys/k1 = %q after the update", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "k2")); !os.IsNotExist(err) {
		t.Errorf("k2 still visible after it left the ConfigMap: %v", err)
	}
	if got := read(t, m, p2, "down", "labels"); got != "app=\"x\"\ntier=\"gold\"" {
		t.Errorf("labels = %q after the pod update", got)
	}

	m.Forget(p.UID)
	if f.registered["p"] || len(f.forgot) != 1 || f.forgot[0] != "uid-1" {
		t.Errorf("Forget: registered %v, tokens forgotten %v", f.registered, f.forgot)
	}
}

func TestMount_MissingObjects(t *testing.T) {
	f := newFake()
	m := newManager(t, f)
	cmVol := func(name string, optional *bool) v1.Volume {
		return v1.Volume{Name: "v-" + name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: optional}}}
	}
	// A missing optional ConfigMap is an empty volume.
	p := testPod(cmVol("gone", ptr.To(true)))
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatalf("optional missing ConfigMap: %v", err)
	}
	// A missing required one is an error naming the volume and the object.
	p = testPod(cmVol("gone", nil))
	err := m.Mount(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "v-gone"`) || !strings.Contains(err.Error(), `configmaps "gone" not found`) {
		t.Errorf("required missing ConfigMap: %v", err)
	}
	// A token that cannot be had fails the projected volume.
	f.token = ""
	p = testPod(v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}}})
	if err := m.Mount(context.Background(), p); err == nil || !strings.Contains(err.Error(), "no token for you") {
		t.Errorf("token failure: %v", err)
	}
	// An unsupported type names itself.
	p = testPod(v1.Volume{Name: "claim", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
	if err := m.Mount(context.Background(), p); err == nil || !strings.Contains(err.Error(), "persistentVolumeClaim") {
		t.Errorf("PVC: %v", err)
	}
	if _, _, err := m.Path(p, "claim"); err == nil {
		t.Error("Path of an unsupported volume: no error")
	}
}

func TestMount_EmptyDirAndHostPath(t *testing.T) {
	f := newFake()
	m := newManager(t, f)
	hp := filepath.Join(t.TempDir(), "made", "here")
	file := filepath.Join(t.TempDir(), "f")
	p := testPod(
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "made", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hp, Type: ptr.To(v1.HostPathDirectoryOrCreate)}}},
		v1.Volume{Name: "file", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: file, Type: ptr.To(v1.HostPathFileOrCreate)}}},
	)
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	dir, ro, _ := m.Path(p, "scratch")
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o777 || ro {
		t.Errorf("emptyDir %s: mode %v, read-only %v, %v; want a writable 0777 directory", dir, fi.Mode(), ro, err)
	}
	if fi, err := os.Stat(hp); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate did not make %s: %v", hp, err)
	}
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate did not make %s: %v", file, err)
	}
	if got, _, _ := m.Path(p, "made"); got != hp {
		t.Errorf("hostPath path %q, want %q", got, hp)
	}
	for _, c := range []struct {
		path string
		typ  v1.HostPathType
	}{{file, v1.HostPathDirectory}, {hp, v1.HostPathFile}, {hp, v1.HostPathSocket}, {filepath.Join(hp, "none"), v1.HostPathDirectory}} {
		p := testPod(v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: c.path, Type: ptr.To(c.typ)}}})
		if err := m.Mount(context.Background(), p); err == nil || !strings.Contains(err.Error(), "hostPath type check failed") {
			t.Errorf("hostPath %s as %s: %v", c.path, c.typ, err)
		}
	}
}

func TestMount_MemoryEmptyDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	f := newFake()
	m := newManager(t, f)
	p := testPod(v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}})
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	dir, _, _ := m.Path(p, "mem")
	t.Cleanup(func() { UnmountUnder(dir) })
	if ok, err := isMountPoint(dir); err != nil || !ok {
		t.Fatalf("%s is not a mount point: %v", dir, err)
	}
	// The size limit holds: 2 MiB do not fit.
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o644); err == nil {
		t.Error("wrote 2 MiB into a 1 MiB tmpfs")
	}
	// Mounting again does not stack a second tmpfs.
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(m.cfg.RootDir, "pods", string(p.UID))
	if err := UnmountUnder(podDir); err != nil {
		t.Fatal(err)
	}
	if ok, _ := isMountPoint(dir); ok {
		t.Error("still a mount point after UnmountUnder")
	}
	if err := os.RemoveAll(podDir); err != nil {
		t.Errorf("pod directory not removable after UnmountUnder: %v", err)
	}
}

// Unmount tears a terminated pod's volumes down: its tmpfs is unmounted
// and its volume directories are gone; a second call is harmless, and
// Mount sets them up afresh.
func TestManager_Unmount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	m := newManager(t, newFake())
	p := testPod(
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	mem, _, _ := m.Path(p, "mem")
	t.Cleanup(func() { UnmountUnder(mem) })
	disk, _, _ := m.Path(p, "disk")
	if err := os.WriteFile(filepath.Join(disk, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := m.Unmount(p); err != nil {
			t.Fatalf("Unmount #%d: %v", i+1, err)
		}
	}
	if ok, _ := isMountPoint(mem); ok {
		t.Error("the memory-backed emptyDir is still mounted")
	}
	for _, d := range []string{mem, disk} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
	if err := m.Mount(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if ok, err := isMountPoint(mem); err != nil || !ok {
		t.Errorf("mounted again: %v, %v; want a tmpfs", ok, err)
	}
}
