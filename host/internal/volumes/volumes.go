// Package volumes is the node's volume manager: it sets up a pod's volumes
// under its directory before its containers are made, keeps the API-data
// volumes (configMap, secret, downwardAPI, projected) up to date while the
// pod runs, and tells the runtime which host path backs each volume.
//
// Layout, as the kubelet's: <RootDir>/pods/<uid>/volumes/kubernetes.io~<kind>/<name>.
// API-data volumes are written by an atomic writer (a "..data" symlink
// swapped in one rename), so a reader never sees half an update; secret
// and projected volumes live on a tmpfs, as the kubelet keeps them off
// disk; emptyDir with medium Memory is a tmpfs of its sizeLimit; hostPath
// honours its type. fsGroup ownership is applied as the kubelet applies
// it.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/objects"
)

// Config configures a Manager.
type Config struct {
	// RootDir holds the pod directories, <RootDir>/pods/<uid>.
	RootDir string
	// Objects gives the ConfigMaps and Secrets volumes project.
	Objects objects.Source
	// Tokens gives the service-account tokens projected volumes ask for.
	Tokens objects.Tokens
	// Node is the node, for resourceFieldRef defaults; may return nil.
	Node func() *v1.Node
	// ResyncPeriod is how often the API-data volumes of running pods are
	// brought up to date with their objects (and tokens refreshed); 0
	// means 10 s.
	ResyncPeriod time.Duration
	// SetUpTimeout bounds setting up one pod's volumes; 0 means 2 min,
	// the kubelet's wait for volumes.
	SetUpTimeout time.Duration
	// Logger receives refresh failures; nil discards.
	Logger hclog.Logger
}

// Manager sets up and refreshes pods' volumes. It is safe for concurrent
// use.
type Manager struct {
	cfg  Config
	log  hclog.Logger
	load payloads

	mu   sync.Mutex
	pods map[types.UID]*podVolumes
}

// podVolumes is one pod's volume state; mu serialises its set-ups.
type podVolumes struct {
	mu      sync.Mutex
	pod     *v1.Pod
	lastErr string // the last refresh error, logged once
}

// New checks cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" || cfg.Objects == nil || cfg.Tokens == nil {
		return nil, errors.New("volumes: RootDir, Objects and Tokens are required")
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 10 * time.Second
	}
	if cfg.SetUpTimeout <= 0 {
		cfg.SetUpTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, load: payloads{objects: cfg.Objects, tokens: cfg.Tokens, node: cfg.Node}, pods: map[types.UID]*podVolumes{}}, nil
}

// Kinds of volume, the directory names of the kubelet's plugins.
const (
	kindEmptyDir    = "kubernetes.io~empty-dir"
	kindConfigMap   = "kubernetes.io~configmap"
	kindSecret      = "kubernetes.io~secret"
	kindDownwardAPI = "kubernetes.io~downward-api"
	kindProjected   = "kubernetes.io~projected"
)

// kind is the plugin directory of v, "" for hostPath and for types this
// node does not support.
func kind(v *v1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return kindEmptyDir
	case v.ConfigMap != nil:
		return kindConfigMap
	case v.Secret != nil:
		return kindSecret
	case v.DownwardAPI != nil:
		return kindDownwardAPI
	case v.Projected != nil:
		return kindProjected
	}
	return ""
}

func (m *Manager) dir(uid types.UID, k, name string) string {
	return filepath.Join(m.cfg.RootDir, "pods", string(uid), "volumes", k, name)
}

// Mount sets up every volume of pod (or brings it up to date) and records
// the pod for refreshes. An error names the volume; the pod's containers
// must not be made until Mount succeeds.
func (m *Manager) Mount(ctx context.Context, pod *v1.Pod) error {
	m.cfg.Objects.RegisterPod(pod)
	m.mu.Lock()
	pv := m.pods[pod.UID]
	if pv == nil {
		pv = &podVolumes{}
		m.pods[pod.UID] = pv
	}
	m.mu.Unlock()
	pv.mu.Lock()
	defer pv.mu.Unlock()
	pv.pod = pod
	ctx, cancel := context.WithTimeout(ctx, m.cfg.SetUpTimeout)
	defer cancel()
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := m.setUp(ctx, pod, v); err != nil {
			errs = append(errs, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Unmount tears down the volumes of a pod that has terminated, as the
// kubelet's volume manager does once a pod's containers are gone: tmpfs
// mounts under <RootDir>/pods/<uid>/volumes are unmounted and the
// directory removed (an emptyDir's data with it); the pod's API data is no
// longer refreshed. A pod run again is mounted afresh by Mount.
func (m *Manager) Unmount(pod *v1.Pod) error {
	m.mu.Lock()
	pv := m.pods[pod.UID]
	delete(m.pods, pod.UID)
	m.mu.Unlock()
	if pv != nil {
		pv.mu.Lock() // a refresh in flight finishes first
		pv.mu.Unlock()
	}
	dir := filepath.Join(m.cfg.RootDir, "pods", string(pod.UID), "volumes")
	if err := UnmountUnder(dir); err != nil {
		return fmt.Errorf("unmount the volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// Path is the host path backing the pod's volume name, and whether the
// kubelet mounts that kind of volume read-only (the API-data volumes).
func (m *Manager) Path(pod *v1.Pod, name string) (path string, readOnly bool, err error) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Name != name {
			continue
		}
		switch k := kind(v); {
		case v.HostPath != nil:
			return v.HostPath.Path, false, nil
		case k == kindEmptyDir:
			return m.dir(pod.UID, k, v.Name), false, nil
		case k != "":
			return m.dir(pod.UID, k, v.Name), true, nil
		}
		return "", false, unsupported(v)
	}
	return "", false, fmt.Errorf("volume %q not in pod spec", name)
}

// Forget drops the pod's state: its objects are no longer watched for it
// and its tokens are forgotten. Its directories are the runtime's to
// remove (after UnmountUnder).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	pv := m.pods[uid]
	delete(m.pods, uid)
	m.mu.Unlock()
	if pv != nil {
		pv.mu.Lock()
		if pv.pod != nil {
			m.cfg.Objects.UnregisterPod(pv.pod)
		}
		pv.mu.Unlock()
	}
	m.cfg.Tokens.ForgetPod(string(uid))
}

// Run refreshes the API-data volumes of every mounted pod each
// ResyncPeriod until ctx ends: new ConfigMap and Secret content, new
// labels and annotations, tokens renewed before they expire.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		m.mu.Lock()
		pods := make([]*podVolumes, 0, len(m.pods))
		for _, pv := range m.pods {
			pods = append(pods, pv)
		}
		m.mu.Unlock()
		for _, pv := range pods {
			m.refresh(ctx, pv)
		}
	}
}

// refresh brings one pod's API-data volumes up to date, logging a failure
// once per distinct error.
func (m *Manager) refresh(ctx context.Context, pv *podVolumes) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	if pv.pod == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.SetUpTimeout)
	defer cancel()
	var errs []error
	for i := range pv.pod.Spec.Volumes {
		v := &pv.pod.Spec.Volumes[i]
		if k := kind(v); k == "" || k == kindEmptyDir {
			continue
		}
		if err := m.setUp(ctx, pv.pod, v); err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", v.Name, err))
		}
	}
	msg := ""
	if err := errors.Join(errs...); err != nil {
		msg = err.Error()
	}
	if msg != "" && msg != pv.lastErr && ctx.Err() == nil {
		m.log.Warn("volume refresh failed", "pod", pv.pod.Namespace+"/"+pv.pod.Name, "error", msg)
	}
	pv.lastErr = msg
}

func unsupported(v *v1.Volume) error {
	return fmt.Errorf("volume %q: this node supports emptyDir, hostPath, configMap, secret, downwardAPI and projected volumes, not %s", v.Name, volumeType(v))
}

// setUp sets up one volume.
func (m *Manager) setUp(ctx context.Context, pod *v1.Pod, v *v1.Volume) error {
	var gid *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		gid = sc.FSGroup
	}
	k := kind(v)
	dir := m.dir(pod.UID, k, v.Name)
	switch {
	case v.HostPath != nil:
		return ensureHostPath(v.HostPath)
	case v.EmptyDir != nil:
		return setUpEmptyDir(dir, v.EmptyDir, gid)
	case v.ConfigMap != nil:
		p, err := m.load.configMap(ctx, pod, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, modeOr(v.ConfigMap.DefaultMode, defaultMode))
		if err != nil {
			return err
		}
		_, err = writeAtomic(dir, p, gid)
		return err
	case v.Secret != nil:
		p, err := m.load.secret(ctx, pod, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, modeOr(v.Secret.DefaultMode, defaultMode))
		if err != nil {
			return err
		}
		m.memoryBacked(dir)
		_, err = writeAtomic(dir, p, gid)
		return err
	case v.DownwardAPI != nil:
		p, err := m.load.downwardAPI(pod, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, defaultMode))
		if err != nil {
			return err
		}
		_, err = writeAtomic(dir, p, gid)
		return err
	case v.Projected != nil:
		p, err := m.load.projected(ctx, pod, v.Projected)
		if err != nil {
			return err
		}
		m.memoryBacked(dir)
		_, err = writeAtomic(dir, p, gid)
		return err
	}
	return unsupported(v)
}

// memoryBacked puts a secret-bearing volume on a tmpfs, as the kubelet
// does; where the agent may not mount (no CAP_SYS_ADMIN), the volume stays
// on disk and that is logged.
func (m *Manager) memoryBacked(dir string) {
	if err := mountTmpfs(dir, 0, "0755"); err != nil {
		m.log.Warn("secret volume kept on disk: cannot mount a tmpfs", "dir", dir, "error", err)
	}
}

// setUpEmptyDir makes an emptyDir: a world-writable directory, or a
// tmpfs of sizeLimit for medium Memory. fsGroup ownership is given once,
// when it is made.
func setUpEmptyDir(dir string, src *v1.EmptyDirVolumeSource, gid *int64) error {
	_, statErr := os.Stat(dir)
	fresh := os.IsNotExist(statErr)
	switch src.Medium {
	case v1.StorageMediumDefault:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
	case v1.StorageMediumMemory:
		var size int64
		if src.SizeLimit != nil {
			size = src.SizeLimit.Value()
		}
		// tmpfs's own root mode, 1777, as the kubelet mounts it.
		if err := mountTmpfs(dir, size, ""); err != nil {
			return err
		}
	default:
		return fmt.Errorf("emptyDir medium %q is not supported by this node", src.Medium)
	}
	if !fresh {
		return nil
	}
	// Make it world-writable if it is not; other bits (tmpfs's sticky
	// bit) stay, as the kubelet leaves them.
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if fi.Mode().Perm() != 0o777 {
		if err := os.Chmod(dir, fi.Mode()&(os.ModeSticky|os.ModeSetgid)|0o777); err != nil {
			return err
		}
	}
	if gid != nil {
		return setOwnership(dir, *gid, false)
	}
	return nil
}

// volumeType names the type of a volume this node does not support.
func volumeType(v *v1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.CSI != nil:
		return "csi"
	case v.NFS != nil:
		return "nfs"
	case v.Image != nil:
		return "image"
	case v.ISCSI != nil:
		return "iscsi"
	case v.FC != nil:
		return "fc"
	}
	return "this type"
}
