package podstate

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(uid string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}} }

func TestStore_Due(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(Config{})
	s.Synced("old", t0)
	s.Synced("fresh", t0.Add(50*time.Second))
	s.Synced("rejected", t0)
	s.Reject("rejected")
	s.Seen("never-synced", t0)
	pods := []*v1.Pod{pod("old"), pod("fresh"), pod("rejected"), pod("never-synced"), pod("unknown")}
	for _, c := range []struct {
		now  time.Time
		want []types.UID
	}{
		{t0.Add(59 * time.Second), nil},
		{t0.Add(60 * time.Second), []types.UID{"old"}},
		{t0.Add(110 * time.Second), []types.UID{"old", "fresh"}},
	} {
		var got []types.UID
		for _, p := range s.Due(pods, c.now, time.Minute) {
			got = append(got, p.UID)
		}
		if len(got) != len(c.want) {
			t.Errorf("Due at +%v = %v, want %v", c.now.Sub(t0), got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Due at +%v = %v, want %v", c.now.Sub(t0), got, c.want)
			}
		}
	}
}

func TestStore_Started(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := New(Config{})
	s.Seen("a", t0)
	s.Seen("a", t0.Add(time.Second)) // a second sighting keeps the first
	if seen, first := s.Started("a"); !first || !seen.Equal(t0) {
		t.Errorf("first Started = %v, %v; want %v, true", seen, first, t0)
	}
	if _, first := s.Started("a"); first {
		t.Error("second Started reported first")
	}
	if seen, first := s.Started("b"); !first || !seen.IsZero() {
		t.Errorf("Started of a pod never seen = %v, %v; want zero, true", seen, first)
	}
}

func TestStore_Forget(t *testing.T) {
	var forgotten []types.UID
	s := New(Config{OnForget: []func(types.UID){
		func(uid types.UID) { forgotten = append(forgotten, uid) },
		func(uid types.UID) { forgotten = append(forgotten, uid+"'") },
	}})
	s.Seen("a", time.Unix(1, 0))
	s.Reject("a")
	s.Synced("a", time.Unix(2, 0))
	s.Started("a")
	s.Forget("a")
	if s.Rejected("a") || !s.LastSync("a").IsZero() || len(s.pods) != 0 {
		t.Errorf("after Forget: rejected %v, last sync %v, %d records", s.Rejected("a"), s.LastSync("a"), len(s.pods))
	}
	if len(forgotten) != 2 || forgotten[0] != "a" || forgotten[1] != "a'" {
		t.Errorf("OnForget calls = %v, want [a a']", forgotten)
	}
	if _, first := s.Started("a"); !first {
		t.Error("a forgotten pod's start is observed again")
	}
}
