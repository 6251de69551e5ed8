package config

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testPod(name, uid, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

var fixedNow = time.Date(2026, 11, 21, 7, 0, 0, 123456789, time.UTC)

// mergeAll runs Merge and returns what it delivered.
func mergeAll(t *testing.T, c *PodConfig, source string, u PodUpdate) []PodUpdate {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Merge(context.Background(), source, u) }()
	var got []PodUpdate
	for {
		select {
		case x := <-c.Updates():
			got = append(got, x)
		case err := <-done:
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			return got
		case <-time.After(5 * time.Second):
			t.Fatal("Merge did not return")
		}
	}
}

// summary renders updates as "OP:uid,uid" strings.
func summary(us []PodUpdate) []string {
	var out []string
	for _, u := range us {
		s := string(u.Op) + ":"
		for i, p := range u.Pods {
			if i > 0 {
				s += ","
			}
			s += string(p.UID)
		}
		out = append(out, s)
	}
	return out
}

func TestPodConfig_Merge(t *testing.T) {
	withStatus := func(p *v1.Pod) *v1.Pod { p.Status.Phase = v1.PodRunning; return p }
	withLabel := func(p *v1.Pod) *v1.Pod { p.Labels = map[string]string{"a": "b"}; return p }
	withAnno := func(k string) func(*v1.Pod) *v1.Pod {
		return func(p *v1.Pod) *v1.Pod { p.Annotations = map[string]string{k: "x"}; return p }
	}
	deleting := func(p *v1.Pod) *v1.Pod {
		now := metav1.NewTime(fixedNow)
		g := int64(5)
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &g
		return p
	}
	a := func() *v1.Pod { return testPod("a", "uid-a", "img:1") }
	b := func() *v1.Pod { return testPod("b", "uid-b", "img:1") }
	tests := []struct {
		name  string
		steps []PodUpdate // all but the last set up the state
		want  []string    // the last step's delivered updates
	}{
		{"first SET becomes ADD", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a(), b()}}}, []string{"ADD:uid-a,uid-b"}},
		{"first empty SET still signals the source", []PodUpdate{{Op: OpSet}}, []string{"ADD:"}},
		{"second empty SET sends nothing", []PodUpdate{{Op: OpSet}, {Op: OpSet}}, nil},
		{"SET without a pod removes it", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a(), b()}}, {Op: OpSet, Pods: []*v1.Pod{a()}}}, []string{"REMOVE:uid-b"}},
		{"SET with a new pod adds it", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{a(), b()}}}, []string{"ADD:uid-b"}},
		{"SET unchanged sends nothing", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{a()}}}, nil},
		{"SET with a changed spec is UPDATE", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{testPod("a", "uid-a", "img:2")}}}, []string{"UPDATE:uid-a"}},
		{"changed labels are UPDATE", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{withLabel(a())}}}, []string{"UPDATE:uid-a"}},
		{"changed annotation is UPDATE", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{withAnno("x/y")(a())}}}, []string{"UPDATE:uid-a"}},
		{"changed local annotation is nothing", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{withAnno(AnnotationMirror)(a())}}}, nil},
		{"status-only change is RECONCILE", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{withStatus(a())}}}, []string{"RECONCILE:uid-a"}},
		{"DeletionTimestamp set is DELETE", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{deleting(a())}}}, []string{"DELETE:uid-a"}},
		{"DELETE op on a known pod is DELETE", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}, {Op: OpDelete, Pods: []*v1.Pod{deleting(a())}}}, []string{"DELETE:uid-a"}},
		{"ADD op adds", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}}, []string{"ADD:uid-a"}},
		{"ADD op keeps the other pods", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}, {Op: OpAdd, Pods: []*v1.Pod{b()}}}, []string{"ADD:uid-b"}},
		{"ADD op of a known pod with a new spec is UPDATE", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}, {Op: OpAdd, Pods: []*v1.Pod{testPod("a", "uid-a", "img:3")}}}, []string{"UPDATE:uid-a"}},
		{"UPDATE op of an unknown pod is ADD", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}, {Op: OpUpdate, Pods: []*v1.Pod{b()}}}, []string{"ADD:uid-b"}},
		{"REMOVE op removes", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a(), b()}}, {Op: OpRemove, Pods: []*v1.Pod{a()}}}, []string{"REMOVE:uid-a"}},
		{"REMOVE op of an unknown pod is nothing", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}, {Op: OpRemove, Pods: []*v1.Pod{b()}}}, nil},
		{"order: REMOVE, ADD, UPDATE, DELETE, RECONCILE", []PodUpdate{
			{Op: OpSet, Pods: []*v1.Pod{a(), b(), testPod("c", "uid-c", "i"), testPod("d", "uid-d", "i")}},
			{Op: OpSet, Pods: []*v1.Pod{testPod("a", "uid-a", "img:9"), deleting(b()), withStatus(testPod("c", "uid-c", "i")), testPod("e", "uid-e", "i")}},
		}, []string{"REMOVE:uid-d", "ADD:uid-e", "UPDATE:uid-a", "DELETE:uid-b", "RECONCILE:uid-c"}},
		{"invalid pod skipped, others kept", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a(), {ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "uid-x"}}}}}, []string{"ADD:uid-a"}},
		{"ADD of a name the source holds under another UID is skipped", []PodUpdate{{Op: OpAdd, Pods: []*v1.Pod{a()}}, {Op: OpAdd, Pods: []*v1.Pod{testPod("a", "uid-a2", "img:1"), b()}}}, []string{"ADD:uid-b"}},
		{"SET may replace a name's UID", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a()}}, {Op: OpSet, Pods: []*v1.Pod{testPod("a", "uid-a2", "img:1")}}}, []string{"REMOVE:uid-a", "ADD:uid-a2"}},
		{"duplicate full name skipped", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a(), testPod("a", "uid-a2", "img:1")}}}, []string{"ADD:uid-a"}},
		{"static pod the API server would refuse skipped", []PodUpdate{{Op: OpSet, Pods: []*v1.Pod{a(), testPod("Bad_Name", "uid-x", "img:1")}}}, []string{"ADD:uid-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Config{Now: func() time.Time { return fixedNow }})
			var got []PodUpdate
			for _, s := range tt.steps {
				got = mergeAll(t, c, "src", s)
			}
			if fmt.Sprint(summary(got)) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", summary(got), tt.want)
			}
			for _, u := range got {
				if u.Source != "src" {
					t.Errorf("update source %q, want src", u.Source)
				}
			}
		})
	}
}

func TestPodConfig_Merge_annotations(t *testing.T) {
	now := fixedNow
	c := New(Config{Now: func() time.Time { return now }})
	got := mergeAll(t, c, "file", PodUpdate{Op: OpSet, Pods: []*v1.Pod{testPod("a", "uid-a", "img:1")}})
	p := got[0].Pods[0]
	if p.Annotations[AnnotationSource] != "file" {
		t.Errorf("source annotation %q", p.Annotations[AnnotationSource])
	}
	wantSeen := fixedNow.Format(time.RFC3339Nano)
	if p.Annotations[AnnotationSeen] != wantSeen {
		t.Errorf("seen annotation %q, want %q", p.Annotations[AnnotationSeen], wantSeen)
	}
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("defaults not applied: restartPolicy %q", p.Spec.RestartPolicy)
	}
	// An update keeps the first-seen time.
	now = now.Add(time.Hour)
	got = mergeAll(t, c, "file", PodUpdate{Op: OpSet, Pods: []*v1.Pod{testPod("a", "uid-a", "img:2")}})
	if s := got[0].Pods[0].Annotations[AnnotationSeen]; s != wantSeen {
		t.Errorf("seen after update %q, want %q", s, wantSeen)
	}
	// The delivered pods are copies: changing them changes nothing inside.
	got[0].Pods[0].Spec.Containers[0].Image = "mutated"
	if img := c.Pods()[0].Spec.Containers[0].Image; img != "img:2" {
		t.Errorf("stored pod changed through an update: image %q", img)
	}
}

func TestPodConfig_Merge_sourcesKeepTheirOwnState(t *testing.T) {
	c := New(Config{})
	mergeAll(t, c, "one", PodUpdate{Op: OpSet, Pods: []*v1.Pod{testPod("a", "uid-a", "i")}})
	got := mergeAll(t, c, "two", PodUpdate{Op: OpSet})
	if fmt.Sprint(summary(got)) != "[ADD:]" {
		t.Errorf("empty SET of another source: %v", summary(got))
	}
	if n := len(c.Pods()); n != 1 {
		t.Errorf("pods after another source's empty SET: %d, want 1", n)
	}
}

type fakeSource struct {
	name string
	pods []*v1.Pod
}

func (f fakeSource) Name() string { return f.name }
func (f fakeSource) Run(ctx context.Context, ch chan<- PodUpdate) error {
	select {
	case ch <- PodUpdate{Op: OpSet, Pods: f.pods}:
	case <-ctx.Done():
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestPodConfig_SeenAllSources(t *testing.T) {
	c := New(Config{Sources: []Source{fakeSource{name: "one"}, fakeSource{name: "two", pods: []*v1.Pod{testPod("a", "uid-a", "i")}}}})
	if c.SeenAllSources() {
		t.Fatal("seen all sources before any update")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case u := <-c.Updates():
			seen[u.Source] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("updates from %v only", seen)
		}
	}
	// Seen is marked right after the delivery, so poll briefly.
	deadline := time.Now().Add(5 * time.Second)
	for !c.SeenAllSources() {
		if time.Now().After(deadline) {
			t.Fatal("not all sources seen after an update from each")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if _, ok := <-c.Updates(); ok {
		t.Error("Updates not closed after Run returned")
	}
}

func TestPodConfig_Run_noSources(t *testing.T) {
	c := New(Config{})
	if !c.SeenAllSources() {
		t.Error("no sources, yet not all seen")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Updates():
		t.Fatal("Updates closed (or sent) with no sources before ctx was done")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-done
	if _, ok := <-c.Updates(); ok {
		t.Error("Updates not closed after Run")
	}
}

func TestPodConfig_SeenAllSources_notBeforeDelivery(t *testing.T) {
	c := New(Config{Sources: []Source{fakeSource{name: "one", pods: []*v1.Pod{testPod("a", "uid-a", "i")}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	// Nobody receives: the source's first update is pending, so it is not
	// seen yet.
	time.Sleep(50 * time.Millisecond)
	if c.SeenAllSources() {
		t.Fatal("source seen before its first update was received")
	}
	<-c.Updates()
	deadline := time.Now().Add(5 * time.Second)
	for !c.SeenAllSources() {
		if time.Now().After(deadline) {
			t.Fatal("source not seen after its update was received")
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkPodConfig_Merge_Set1000(b *testing.B) {
	pods := make([]*v1.Pod, 1000)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("p%d", i), fmt.Sprintf("uid-%d", i), "img:1")
	}
	c := New(Config{})
	go func() {
		for range c.Updates() {
		}
	}()
	ctx := context.Background()
	for b.Loop() {
		_ = c.Merge(ctx, "file", PodUpdate{Op: OpSet, Pods: pods})
	}
}
