// Package imagegc is the node's image garbage collection, the kubelet's
// image GC manager (pkg/kubelet/images/image_gc_manager.go): each period
// it lists the runtime's images and every container (running or not),
// records when each image was first seen and last used by a container,
// then
//
//   - removes the images unused for longer than MaxAge (when set, and
//     only once MaxAge has passed since the collection began);
//   - when the image filesystem's usage is at or above the high threshold,
//     removes unused images, least recently used first (first seen first
//     among equals), until the usage would be down to the low threshold.
//
// An image a container uses, one the runtime pins (the sandbox image), or
// one first seen less than MinAge ago is never removed. A runtime from
// before pinned images (containerd 1.6) names its sandbox image in its
// verbose status' config (sandboxImage): that image is kept as pinned. The image
// filesystem is the one the runtime's ImageFsInfo names: its capacity and
// available bytes come from statfs of its mountpoint, as the kubelet's CRI
// stats provider reads them. Failures are events on the Node with the
// kubelet's reasons (FreeDiskSpaceFailed, InvalidDiskCapacity, and
// ImageGCFailed when a collection fails twice in a row).
package imagegc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's event reasons.
const (
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonInvalidDiskCapacity = "InvalidDiskCapacity"
	ReasonImageGCFailed       = "ImageGCFailed"
)

// The reasons an image is removed for: the reason label of
// wasmlet_image_garbage_collected_total, the kubelet's.
const (
	removedForAge   = "age"
	removedForSpace = "space"
)

// Images is the part of the CRI image service the collection uses
// (k8s.io/cri-api's ImageManagerService has these methods).
type Images interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Containers lists the runtime's containers, in every state, and reads
// its status (the CRI RuntimeService's ListContainers and Status).
type Containers interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// Policy is when images are collected, the kubelet's ImageGCPolicy.
type Policy struct {
	// HighThresholdPercent is the usage of the image filesystem at or
	// above which unused images are removed; LowThresholdPercent the
	// usage they are removed down to.
	HighThresholdPercent, LowThresholdPercent int
	// MinAge is how long an image is kept after it was first seen.
	MinAge time.Duration
	// MaxAge, when not 0, removes an image unused for longer, whatever
	// the usage.
	MaxAge time.Duration
}

// FsStats reads a filesystem's capacity and available bytes.
type FsStats func(path string) (capacity, available int64, err error)

// Config configures a Manager.
type Config struct {
	// Images and Containers are the runtime's.
	Images     Images
	Containers Containers
	// Policy is the thresholds and ages.
	Policy Policy
	// Period is how often a collection runs (the kubelet's 5 min); <= 0
	// means that.
	Period time.Duration
	// Event records an event on the Node; nil records none.
	Event func(eventType, reason, message string)
	// FsStats reads the image filesystem; nil is statfs(2).
	FsStats FsStats
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger receives the collection's logs; nil discards.
	Logger hclog.Logger
	// Registerer receives wasmlet_image_garbage_collected_total and
	// wasmlet_image_fs_usage_percent; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Manager collects unused images. Build it with New; Run drives it.
type Manager struct {
	cfg     Config
	log     hclog.Logger
	removed *prometheus.CounterVec
	usage   prometheus.Gauge

	mu      sync.Mutex
	records map[string]*record // by image ID
	began   time.Time
}

// record is what the collection knows of an image.
type record struct {
	firstDetected time.Time
	lastUsed      time.Time // zero: never seen in use
	size          uint64
	pinned        bool
}

// New checks cfg's policy as the kubelet does and returns a Manager.
func New(cfg Config) (*Manager, error) {
	p := cfg.Policy
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		return nil, fmt.Errorf("imagegc: invalid high threshold %d%%, must be in [0, 100]", p.HighThresholdPercent)
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		return nil, fmt.Errorf("imagegc: invalid low threshold %d%%, must be in [0, 100]", p.LowThresholdPercent)
	}
	if p.LowThresholdPercent > p.HighThresholdPercent {
		return nil, fmt.Errorf("imagegc: low threshold %d%% above high threshold %d%%", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if cfg.Images == nil || cfg.Containers == nil {
		return nil, errors.New("imagegc: Images and Containers are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 5 * time.Minute
	}
	if cfg.Event == nil {
		cfg.Event = func(string, string, string) {}
	}
	if cfg.FsStats == nil {
		cfg.FsStats = statfs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, records: map[string]*record{}, began: cfg.Now(),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmlet_image_garbage_collected_total",
			Help: "Images removed by image garbage collection, by reason: age (imageMaximumGCAge) or space (over the high threshold).",
		}, []string{"reason"}),
		usage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wasmlet_image_fs_usage_percent",
			Help: "Usage of the image filesystem, in percent, as the last image garbage collection read it.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.removed, m.usage} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("imagegc: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// Disabled reports whether the policy never removes an image: a high
// threshold of 100% and no MaxAge, as the kubelet turns its collection off.
func (p Policy) Disabled() bool { return p.HighThresholdPercent == 100 && p.MaxAge == 0 }

// Run collects now and then every Period until ctx ends. A collection
// that fails after one that failed is an ImageGCFailed event on the Node,
// as the kubelet reports repeated failures only. With the collection off
// (Policy.Disabled) it still lists the images every Period, as the
// kubelet's image manager detects them whether or not it collects: the
// minimum age DeleteUnusedImages respects counts from when an image was
// first seen, so an image must have been seen before a reclaim under
// disk pressure may remove it.
func (m *Manager) Run(ctx context.Context) error {
	disabled := m.cfg.Policy.Disabled()
	if disabled {
		m.log.Info("image garbage collection off: high threshold 100% and no maximum age; images are still listed every period for the eviction manager's reclaim")
	}
	m.mu.Lock()
	m.began = m.cfg.Now()
	m.mu.Unlock()
	failed := false
	t := time.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		if disabled {
			if _, err := m.detect(ctx, m.cfg.Now()); err != nil && ctx.Err() == nil {
				m.log.Warn("listing images failed", "error", err)
			}
		} else if err := m.GarbageCollect(ctx); err != nil && ctx.Err() == nil {
			if failed {
				m.log.Error("image garbage collection failed again", "error", err)
				m.cfg.Event(v1.EventTypeWarning, ReasonImageGCFailed, err.Error())
			} else {
				m.log.Warn("image garbage collection failed", "error", err)
			}
			failed = true
		} else {
			failed = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// candidate is an image that may be removed.
type candidate struct {
	id string
	record
}

// GarbageCollect runs one collection.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	now := m.cfg.Now()
	images, err := m.evictionOrder(ctx, now)
	if err != nil {
		return err
	}
	if images, err = m.freeOld(ctx, images, now); err != nil {
		return err
	}
	capacity, available, err := m.imageFs(ctx)
	if err != nil {
		return err
	}
	if available > capacity {
		available = capacity
	}
	if capacity == 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		m.cfg.Event(v1.EventTypeWarning, ReasonInvalidDiskCapacity, err.Error())
		return err
	}
	p := m.cfg.Policy
	usage := 100 - int(available*100/capacity)
	m.usage.Set(float64(usage))
	if usage < p.HighThresholdPercent {
		return nil
	}
	toFree := capacity*int64(100-p.LowThresholdPercent)/100 - available
	m.log.Info("image filesystem over the high threshold; removing unused images down to the low threshold",
		"usage_percent", usage, "high_percent", p.HighThresholdPercent, "low_percent", p.LowThresholdPercent, "bytes_to_free", toFree)
	freed, err := m.freeSpace(ctx, toFree, images, now)
	if err != nil {
		return err
	}
	if freed < toFree {
		msg := fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %d bytes used). "+
			"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
			"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
			usage, capacity, freed)
		m.cfg.Event(v1.EventTypeWarning, ReasonFreeDiskSpaceFailed, msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnusedImages removes every image no container uses that the
// collection may remove (not pinned, first seen at least MinAge ago),
// least recently used first, whatever the usage: the eviction manager's
// reclaim under disk pressure, the kubelet's DeleteUnusedImages. It
// returns the bytes freed.
func (m *Manager) DeleteUnusedImages(ctx context.Context) (int64, error) {
	now := m.cfg.Now()
	images, err := m.evictionOrder(ctx, now)
	if err != nil {
		return 0, err
	}
	return m.freeSpace(ctx, math.MaxInt64, images, now)
}

// detect lists images and containers and updates the records: new images
// are first seen now, images a container uses are used now, images gone
// are forgotten. It returns the IDs in use.
func (m *Manager) detect(ctx context.Context, now time.Time) (map[string]bool, error) {
	images, err := m.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("imagegc: list images: %w", err)
	}
	containers, err := m.cfg.Containers.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("imagegc: list containers: %w", err)
	}
	// A container names its image by ID (ImageRef, and Image.Image on some
	// runtimes), by tag or by digest: each name of an image counts.
	refs := map[string]bool{}
	for _, c := range containers {
		refs[c.GetImageRef()] = true
		refs[c.GetImageId()] = true
		refs[c.GetImage().GetImage()] = true
	}
	delete(refs, "")
	sandbox := m.sandboxImage(ctx)
	inUse := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, img := range images {
		id := img.GetId()
		if id == "" {
			continue
		}
		seen[id] = true
		r, ok := m.records[id]
		if !ok {
			r = &record{firstDetected: now}
			m.records[id] = r
		}
		used := refs[id]
		for _, name := range append(slices.Clone(img.GetRepoTags()), img.GetRepoDigests()...) {
			used = used || refs[name]
		}
		if used {
			inUse[id] = true
			r.lastUsed = now
		}
		r.size, r.pinned = img.GetSize(), img.GetPinned() || (sandbox != "" && (slices.Contains(img.GetRepoTags(), sandbox) || slices.Contains(img.GetRepoDigests(), sandbox)))
	}
	for id := range m.records {
		if !seen[id] {
			delete(m.records, id)
		}
	}
	return inUse, nil
}

// sandboxImage is the sandbox image a runtime's verbose status names in
// its config (containerd's sandboxImage), fully qualified as the runtime
// tags images; "" when it names none.
func (m *Manager) sandboxImage(ctx context.Context) string {
	st, err := m.cfg.Containers.Status(ctx, true)
	if err != nil {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg) != nil || cfg.SandboxImage == "" {
		return ""
	}
	ref, err := name.ParseReference(cfg.SandboxImage)
	if err != nil {
		return cfg.SandboxImage
	}
	// As containerd names images: docker.io, not go-containerregistry's
	// index.docker.io.
	registry := ref.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	return registry + "/" + ref.Context().RepositoryStr() + sep + ref.Identifier()
}

// evictionOrder is the images that may be removed, least recently used
// first, then first seen first: not in use, not pinned.
func (m *Manager) evictionOrder(ctx context.Context, now time.Time) ([]candidate, error) {
	inUse, err := m.detect(ctx, now)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []candidate
	for id, r := range m.records {
		if inUse[id] || r.pinned {
			continue
		}
		out = append(out, candidate{id: id, record: *r})
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b candidate) int {
		if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
			return c
		}
		return cmp.Or(a.firstDetected.Compare(b.firstDetected), cmp.Compare(a.id, b.id))
	})
	return out, nil
}

// freeOld removes the images unused for longer than MaxAge, once MaxAge
// has passed since the collection began; it returns the others.
func (m *Manager) freeOld(ctx context.Context, images []candidate, now time.Time) ([]candidate, error) {
	maxAge := m.cfg.Policy.MaxAge
	m.mu.Lock()
	began := m.began
	m.mu.Unlock()
	if maxAge == 0 || now.Sub(began) <= maxAge {
		return images, nil
	}
	var left []candidate
	var errs []error
	for _, img := range images {
		if now.Sub(img.lastUsed) <= maxAge {
			left = append(left, img)
			continue
		}
		if err := m.remove(ctx, img, removedForAge); err != nil {
			errs = append(errs, err)
			left = append(left, img)
		}
	}
	if len(errs) > 0 {
		return left, fmt.Errorf("imagegc: removing images unused for more than %v: %w", maxAge, errors.Join(errs...))
	}
	return left, nil
}

// freeSpace removes images in order until toFree bytes are freed,
// skipping those used at this collection or first seen less than MinAge
// ago; it returns the bytes freed.
func (m *Manager) freeSpace(ctx context.Context, toFree int64, images []candidate, now time.Time) (int64, error) {
	var freed int64
	var errs []error
	for _, img := range images {
		if !img.lastUsed.Before(now) {
			continue
		}
		if now.Sub(img.firstDetected) < m.cfg.Policy.MinAge {
			m.log.Debug("image too young to remove", "image", img.id, "first_seen", img.firstDetected, "minimum_age", m.cfg.Policy.MinAge)
			continue
		}
		if err := m.remove(ctx, img, removedForSpace); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += int64(img.size)
		if freed >= toFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("imagegc: wanted to free %d bytes, freed %d with errors: %w", toFree, freed, errors.Join(errs...))
	}
	return freed, nil
}

// remove removes one image and forgets it.
func (m *Manager) remove(ctx context.Context, img candidate, reason string) error {
	m.log.Info("removing image", "image", img.id, "size", img.size, "reason", reason, "last_used", img.lastUsed, "first_seen", img.firstDetected)
	if err := m.cfg.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: img.id}); err != nil {
		return fmt.Errorf("remove image %s: %w", img.id, err)
	}
	m.mu.Lock()
	delete(m.records, img.id)
	m.mu.Unlock()
	m.removed.WithLabelValues(reason).Inc()
	return nil
}

// imageFs is the image filesystem's capacity and available bytes: the
// filesystem ImageFsInfo names, read by statfs of its mountpoint.
func (m *Manager) imageFs(ctx context.Context) (capacity, available int64, err error) {
	mp, err := m.Mountpoint(ctx)
	if err != nil {
		return 0, 0, err
	}
	capacity, available, err = m.cfg.FsStats(mp)
	if err != nil {
		return 0, 0, fmt.Errorf("imagegc: image filesystem %s: %w", mp, err)
	}
	return capacity, available, nil
}

// Mountpoint is the mountpoint of the image filesystem the runtime's
// ImageFsInfo names.
func (m *Manager) Mountpoint(ctx context.Context) (string, error) {
	info, err := m.cfg.Images.ImageFsInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("imagegc: image filesystem info: %w", err)
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return "", errors.New("imagegc: the runtime's ImageFsInfo names no image filesystem")
	}
	return fss[0].GetFsId().GetMountpoint(), nil
}

// statfs is a filesystem's size and the bytes available to unprivileged
// users, as df reports them.
func statfs(path string) (capacity, available int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}
