package pod

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmlet/wasmlet/host/internal/config"
)

func mk(name, uid string, annotations map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid), Annotations: annotations}}
}

func static(name, uid string) *v1.Pod {
	return mk(name, uid, map[string]string{config.AnnotationSource: "file", config.AnnotationHash: uid})
}

func mirror(name, uid, hash string) *v1.Pod {
	return mk(name, uid, map[string]string{config.AnnotationSource: "api", config.AnnotationMirror: hash})
}

func uids(pods []*v1.Pod) []types.UID {
	out := []types.UID{}
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

func TestManager_UpdatePod(t *testing.T) {
	m := New()
	m.SetPods([]*v1.Pod{static("s", "s1"), mirror("s", "m1", "s1"), mk("api", "a1", map[string]string{config.AnnotationSource: "api"})})
	pods, mirrors := m.PodsAndMirrorPods()
	if got := uids(pods); !reflect.DeepEqual(got, []types.UID{"a1", "s1"}) {
		t.Errorf("pods %v", got)
	}
	if got := uids(mirrors); !reflect.DeepEqual(got, []types.UID{"m1"}) {
		t.Errorf("mirror pods %v", got)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"PodByUID static", ok(m.PodByUID("s1")), "s1"},
		{"PodByUID mirror is not a pod", ok(m.PodByUID("m1")), ""},
		{"PodByFullName", ok(m.PodByFullName("s_default")), "s1"},
		{"PodByName", ok(m.PodByName("default", "api")), "a1"},
		{"MirrorPodByPod", ok(m.MirrorPodByPod(static("s", "s1"))), "m1"},
		{"PodByMirrorPod", ok(m.PodByMirrorPod(mirror("s", "m1", "s1"))), "s1"},
		{"OrphanedMirrorPodNames", m.OrphanedMirrorPodNames(), []string(nil)},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func ok(p *v1.Pod, found bool) string {
	if !found {
		return ""
	}
	return string(p.UID)
}

func TestManager_RemovePod(t *testing.T) {
	m := New()
	m.AddPod(static("s", "s1"))
	m.AddPod(mirror("s", "m1", "s1"))
	m.AddPod(mirror("gone", "m2", "x"))
	if got := m.OrphanedMirrorPodNames(); !reflect.DeepEqual(got, []string{"gone_default"}) {
		t.Errorf("orphans %v", got)
	}
	m.RemovePod(static("s", "s1"))
	if got := m.OrphanedMirrorPodNames(); !reflect.DeepEqual(got, []string{"gone_default", "s_default"}) {
		t.Errorf("orphans after removing the static pod %v", got)
	}
	if _, found := m.PodByFullName("s_default"); found {
		t.Error("removed pod still found by full name")
	}
	m.RemovePod(mirror("s", "m1", "s1"))
	if _, found := m.MirrorPodByPod(static("s", "s1")); found {
		t.Error("removed mirror pod still found")
	}
}

func TestManager_UpdatePod_newUIDSameName(t *testing.T) {
	m := New()
	m.AddPod(static("s", "old"))
	m.AddPod(static("s", "new"))
	// The old pod is still known by UID until it is removed, and removing it
	// does not drop the new one's name index.
	m.RemovePod(static("s", "old"))
	if got := ok(m.PodByFullName("s_default")); got != "new" {
		t.Errorf("full name resolves to %q, want new", got)
	}
}

func TestIsMirrorPodOf(t *testing.T) {
	s := static("s", "h1")
	tests := []struct {
		mirror *v1.Pod
		want   bool
	}{
		{mirror("s", "m", "h1"), true},
		{mirror("s", "m", "h2"), false},
		{mirror("t", "m", "h1"), false},
		{mk("s", "m", nil), false},
	}
	for i, tt := range tests {
		if got := IsMirrorPodOf(tt.mirror, s); got != tt.want {
			t.Errorf("%d: got %v", i, got)
		}
	}
}

func BenchmarkManager_Pods1000(b *testing.B) {
	m := New()
	for i := range 1000 {
		m.AddPod(static(fmt.Sprintf("p%d", i), fmt.Sprintf("u%d", i)))
	}
	for b.Loop() {
		_ = m.Pods()
	}
}
