package apiserver

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wasmlet/wasmlet/host/internal/config"
)

func apiPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}},
	}
}

func names(u config.PodUpdate) map[string]bool {
	m := map[string]bool{}
	for _, p := range u.Pods {
		m[p.Name] = true
	}
	return m
}

// next returns the next update, failing after a timeout.
func next(t *testing.T, ch <-chan config.PodUpdate) config.PodUpdate {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10 s")
	}
	return config.PodUpdate{}
}

// waitFor reads updates until one has exactly want.
func waitFor(t *testing.T, ch <-chan config.PodUpdate, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-ch:
			if u.Op != config.OpSet || u.Source != config.APIServerSource {
				t.Fatalf("update %s from %q, want SET from api", u.Op, u.Source)
			}
			got := names(u)
			if len(got) != len(u.Pods) {
				t.Fatalf("a SET holds a pod twice: %d pods, %d names", len(u.Pods), len(got))
			}
			if len(got) == len(want) {
				ok := true
				for _, w := range want {
					ok = ok && got[w]
				}
				if ok {
					return
				}
			}
		case <-deadline:
			t.Fatalf("no SET with exactly %v within 10 s", want)
		}
	}
}

func TestSource_Run(t *testing.T) {
	client := fake.NewClientset(apiPod("a"))
	src := New(Config{Client: client, NodeName: "n1"})
	if src.Name() != config.APIServerSource {
		t.Fatalf("Name() = %q, want %q", src.Name(), config.APIServerSource)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan config.PodUpdate)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, ch) }()

	// The first update is the complete listed set.
	first := next(t, ch)
	if first.Op != config.OpSet || len(first.Pods) != 1 || first.Pods[0].Name != "a" {
		t.Fatalf("first update %s with %d pods, want SET of [a]", first.Op, len(first.Pods))
	}
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, apiPod("b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "a", "b")
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "b")

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestSource_RunNeedsClientAndNode(t *testing.T) {
	for _, c := range []Config{{NodeName: "n1"}, {Client: fake.NewClientset()}} {
		if err := New(c).Run(context.Background(), make(chan config.PodUpdate)); err == nil {
			t.Errorf("Run with %+v: no error", c)
		}
	}
}

// A watch that ends (timeout) and one refused with "410 Gone" (expired
// resource version) are followed by a relist or re-watch: later changes
// still arrive, and no SET ever holds a pod twice.
func TestSource_RunSurvivesWatchEndAndExpiry(t *testing.T) {
	client := fake.NewClientset(apiPod("a"))
	var mu sync.Mutex
	watches := 0
	var first *watch.FakeWatcher
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		watches++
		switch watches {
		case 1:
			first = watch.NewFake()
			return true, first, nil
		case 2:
			return true, nil, apierrors.NewResourceExpired("too old resource version")
		}
		return false, nil, nil // the tracker's own watch from here on
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan config.PodUpdate)
	go New(Config{Client: client, NodeName: "n1"}).Run(ctx, ch)
	waitFor(t, ch, "a")
	// End the first watch as a server timeout does.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		w := first
		mu.Unlock()
		if w != nil {
			w.Stop()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source never watched")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Wait for the tracker's watch (the third) to be in place.
	deadline = time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := watches
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches after the first ended, want a re-watch after the 410", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, apiPod("b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "a", "b")
}
