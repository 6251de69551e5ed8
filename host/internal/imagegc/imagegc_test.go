package imagegc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeCRI is an image service and container list in memory; the image
// filesystem's usage is the images' sizes plus other, of capacity.
type fakeCRI struct {
	mu         sync.Mutex
	images     []*runtimeapi.Image
	containers []*runtimeapi.Container
	removed    []string
	capacity   int64
	other      int64 // bytes used by other things than images
	fsErr      error
	config     string // the verbose status' config
}

func (f *fakeCRI) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.images), nil
}

func (f *fakeCRI) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = slices.DeleteFunc(f.images, func(i *runtimeapi.Image) bool { return i.Id == spec.Image })
	f.removed = append(f.removed, spec.Image)
	return nil
}

func (f *fakeCRI) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if f.fsErr != nil {
		return nil, f.fsErr
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd"}}}}, nil
}

func (f *fakeCRI) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.containers), nil
}

func (f *fakeCRI) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": f.config}}, nil
}

func (f *fakeCRI) fsStats(path string) (int64, int64, error) {
	if path != "/var/lib/containerd" {
		return 0, 0, errors.New("statfs of " + path + ", not the ImageFsInfo mountpoint")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	used := f.other
	for _, i := range f.images {
		used += int64(i.Size)
	}
	return f.capacity, f.capacity - used, nil
}

// use makes a container (in the given state) use image id.
func (f *fakeCRI) use(id string, state runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = append(f.containers, &runtimeapi.Container{Id: "c-" + id, ImageRef: id, State: state})
}

func (f *fakeCRI) stopUsing() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = nil
}

func (f *fakeCRI) removedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func image(id string, size uint64) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: []string{"example.com/" + id + ":1"}}
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type event struct{ typ, reason, msg string }

// newManager returns a Manager over f at the clock's time, with the
// events it records.
func newManager(t *testing.T, f *fakeCRI, c *clock, p Policy) (*Manager, *[]event) {
	t.Helper()
	var mu sync.Mutex
	events := &[]event{}
	m, err := New(Config{Images: f, Containers: f, Policy: p, FsStats: f.fsStats, Now: c.now,
		Registerer: prometheus.NewRegistry(),
		Event: func(typ, reason, msg string) {
			mu.Lock()
			defer mu.Unlock()
			*events = append(*events, event{typ, reason, msg})
		}})
	if err != nil {
		t.Fatal(err)
	}
	return m, events
}

func TestManager_GarbageCollect_leastRecentlyUsedFirst(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{images: []*runtimeapi.Image{image("a", 100), image("b", 100), image("c", 100), image("d", 100)}, capacity: 1000}
	m, _ := newManager(t, f, c, Policy{HighThresholdPercent: 90, LowThresholdPercent: 30, MinAge: time.Minute})
	// Use c, then a, then b; d is never used. Under the high threshold
	// (40%), nothing goes.
	for _, id := range []string{"c", "a", "b"} {
		f.use(id, runtimeapi.ContainerState_CONTAINER_RUNNING)
		if err := m.GarbageCollect(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.stopUsing()
		c.t = c.t.Add(time.Minute)
	}
	if r := f.removedIDs(); len(r) != 0 {
		t.Fatalf("removed %v under the high threshold", r)
	}
	// Now 95% used: down to 30% frees 650 bytes of the 400 of images, and
	// more than they hold is a FreeDiskSpaceFailed; the order is d (never
	// used), then c, a, b.
	f.other = 550
	err := m.GarbageCollect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Failed to free sufficient space") {
		t.Fatalf("error %v, want the kubelet's insufficient space message", err)
	}
	if r := f.removedIDs(); !slices.Equal(r, []string{"d", "c", "a", "b"}) {
		t.Errorf("removed %v, want d c a b", r)
	}
}

func TestManager_GarbageCollect_stopsAtTheLowThreshold(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{images: []*runtimeapi.Image{image("old", 100), image("mid", 100), image("new", 100)}, capacity: 1000, other: 600}
	m, events := newManager(t, f, c, Policy{HighThresholdPercent: 85, LowThresholdPercent: 75})
	for _, id := range []string{"old", "mid", "new"} {
		f.use(id, runtimeapi.ContainerState_CONTAINER_EXITED)
		if _, err := m.detect(context.Background(), c.t); err != nil {
			t.Fatal(err)
		}
		f.stopUsing()
		c.t = c.t.Add(time.Second)
	}
	// 90% used, 75% wanted: 150 bytes, two images.
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := f.removedIDs(); !slices.Equal(r, []string{"old", "mid"}) {
		t.Errorf("removed %v, want old then mid", r)
	}
	if len(*events) != 0 {
		t.Errorf("events %v, want none", *events)
	}
	if got := counter(m.removed.WithLabelValues("space")); got != 2 {
		t.Errorf("wasmlet_image_garbage_collected_total{reason=space} = %v, want 2", got)
	}
}

func TestManager_GarbageCollect_neverAnImageInUseOrPinned(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	pause := image("pause", 10)
	pause.Pinned = true
	oldPause := &runtimeapi.Image{Id: "sha256:p2", Size: 10, RepoTags: []string{"docker.io/library/pause:3.9"}}
	f := &fakeCRI{images: []*runtimeapi.Image{image("running", 100), image("exited", 100), image("tagged", 100), pause, oldPause, image("free", 100)}, capacity: 1000, other: 900,
		config: `{"sandboxImage":"pause:3.9"}`}
	f.use("running", runtimeapi.ContainerState_CONTAINER_RUNNING)
	f.use("exited", runtimeapi.ContainerState_CONTAINER_EXITED)
	f.containers = append(f.containers, &runtimeapi.Container{Id: "by-tag", Image: &runtimeapi.ImageSpec{Image: "example.com/tagged:1"}})
	m, events := newManager(t, f, c, Policy{HighThresholdPercent: 1, LowThresholdPercent: 0})
	err := m.GarbageCollect(context.Background())
	if r := f.removedIDs(); !slices.Equal(r, []string{"free"}) {
		t.Errorf("removed %v, want only free", r)
	}
	if err == nil || len(*events) != 1 || (*events)[0].reason != ReasonFreeDiskSpaceFailed || (*events)[0].typ != "Warning" {
		t.Errorf("error %v, events %v: want a FreeDiskSpaceFailed warning", err, *events)
	}
}

func TestManager_GarbageCollect_minimumAge(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{images: []*runtimeapi.Image{image("young", 100)}, capacity: 1000, other: 900}
	m, _ := newManager(t, f, c, Policy{HighThresholdPercent: 50, LowThresholdPercent: 40, MinAge: 2 * time.Minute})
	m.GarbageCollect(context.Background())
	c.t = c.t.Add(2*time.Minute - time.Second)
	m.GarbageCollect(context.Background())
	if r := f.removedIDs(); len(r) != 0 {
		t.Fatalf("removed %v younger than the minimum age", r)
	}
	c.t = c.t.Add(time.Second)
	m.GarbageCollect(context.Background())
	if r := f.removedIDs(); !slices.Equal(r, []string{"young"}) {
		t.Errorf("removed %v at the minimum age, want young", r)
	}
}

func TestManager_GarbageCollect_maximumAge(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{images: []*runtimeapi.Image{image("stale", 100), image("used", 100)}, capacity: 1000}
	m, _ := newManager(t, f, c, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: time.Hour})
	f.use("used", runtimeapi.ContainerState_CONTAINER_RUNNING)
	m.GarbageCollect(context.Background())
	f.stopUsing()
	// 30 min later "used" was used 30 min ago; an hour has not passed
	// since the collection began, so nothing goes.
	c.t = c.t.Add(30 * time.Minute)
	m.GarbageCollect(context.Background())
	if r := f.removedIDs(); len(r) != 0 {
		t.Fatalf("removed %v before the maximum age passed since the start", r)
	}
	// 61 min: stale (never used) goes; used was last used 61 min ago too.
	c.t = c.t.Add(31 * time.Minute)
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := f.removedIDs(); !slices.Equal(r, []string{"stale", "used"}) {
		t.Errorf("removed %v, want stale then used", r)
	}
	if got := counter(m.removed.WithLabelValues("age")); got != 2 {
		t.Errorf("wasmlet_image_garbage_collected_total{reason=age} = %v, want 2", got)
	}
}

func TestManager_Run_repeatedFailureIsAnEvent(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{capacity: 1000, fsErr: errors.New("image fs unavailable")}
	var mu sync.Mutex
	var reasons []string
	m, err := New(Config{Images: f, Containers: f, Policy: Policy{HighThresholdPercent: 85, LowThresholdPercent: 80},
		Period: time.Millisecond, FsStats: f.fsStats, Now: c.now,
		Event: func(_, reason, _ string) { mu.Lock(); reasons = append(reasons, reason); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, m, "no ImageGCFailed event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reasons) > 0
	})
	if reasons[0] != ReasonImageGCFailed {
		t.Errorf("event %v, want ImageGCFailed", reasons)
	}
}

func TestNew_policy(t *testing.T) {
	f := &fakeCRI{}
	for _, p := range []Policy{{HighThresholdPercent: 101}, {HighThresholdPercent: 50, LowThresholdPercent: 60}, {LowThresholdPercent: -1}} {
		if _, err := New(Config{Images: f, Containers: f, Policy: p}); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	if !(Policy{HighThresholdPercent: 100}).Disabled() || (Policy{HighThresholdPercent: 100, MaxAge: time.Hour}).Disabled() {
		t.Error("Disabled: want true only with 100% and no maximum age")
	}
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func TestManager_DeleteUnusedImages(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{images: []*runtimeapi.Image{image("used", 100), image("old", 200), image("older", 300)}, capacity: 10000}
	m, _ := newManager(t, f, c, Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute})
	f.use("used", runtimeapi.ContainerState_CONTAINER_EXITED)
	// Far under the high threshold: a collection removes nothing.
	if err := m.GarbageCollect(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Minute)
	f.images = append(f.images, image("young", 400))
	freed, err := m.DeleteUnusedImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := f.removedIDs()
	slices.Sort(r)
	if !slices.Equal(r, []string{"old", "older"}) || freed != 500 {
		t.Errorf("removed %v freeing %d, want old and older (500 bytes): never the used one nor one younger than the minimum age", r, freed)
	}
}

// TestManager_Run_detectsWhenDisabled: with the collection off, Run
// removes nothing but records when it first saw each image, so a reclaim
// under disk pressure a minimum age later removes an unused image; an
// image seen for the first time by the reclaim itself is too young.
func TestManager_Run_detectsWhenDisabled(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeCRI{images: []*runtimeapi.Image{image("unused", 100)}, capacity: 150}
	m, err := New(Config{Images: f, Containers: f, Policy: Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MinAge: time.Minute},
		Period: time.Millisecond, FsStats: f.fsStats, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, m, "Run with the collection off never listed the images", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		_, seen := m.records["unused"]
		return seen
	})
	if r := f.removedIDs(); len(r) != 0 {
		t.Fatalf("Run with the collection off removed %v", r)
	}
	c.t = c.t.Add(time.Minute)
	f.images = append(f.images, image("new", 10))
	freed, err := m.DeleteUnusedImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := f.removedIDs(); !slices.Equal(r, []string{"unused"}) || freed != 100 {
		t.Errorf("reclaim removed %v freeing %d, want the image Run saw a minimum age ago (100 bytes), not the one first seen now", r, freed)
	}
}

// runUntil runs m until cond holds, polled every millisecond for at most
// 10 s (failing with msg then), and waits for Run to return.
func runUntil(t *testing.T, m *Manager, msg string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(time.Millisecond)
	}
}
