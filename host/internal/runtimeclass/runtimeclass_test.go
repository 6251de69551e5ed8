package runtimeclass

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// patience bounds every wait for the informer; tests never assert how fast
// it catches up.
const patience = 30 * time.Second

func pod(runtimeClass *string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"},
		Spec:       v1.PodSpec{RuntimeClassName: runtimeClass},
	}
}

func runtimeClass(name, handler string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
}

func ptr(s string) *string { return &s }

// run starts m's informer for the test's lifetime.
func run(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually polls f until it returns nil or patience runs out.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, patience, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestManager_Handler(t *testing.T) {
	client := fake.NewClientset(runtimeClass("gvisor", "runsc"), runtimeClass("plain", "runc"))
	m := New(Config{Client: client})
	run(t, m)
	eventually(t, "informer sync", func() error { _, err := m.Handler(pod(ptr("plain"))); return err })

	for _, tc := range []struct {
		name        string
		class       *string
		want        string
		notFound    bool
		errContains string
	}{
		{name: "no RuntimeClass", class: nil, want: ""},
		{name: "empty RuntimeClass name", class: ptr(""), want: ""},
		{name: "known", class: ptr("gvisor"), want: "runsc"},
		{name: "another", class: ptr("plain"), want: "runc"},
		{name: "unknown", class: ptr("kata"), notFound: true, errContains: `runtimeclass.node.k8s.io "kata" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Handler(pod(tc.class))
			if tc.errContains != "" {
				if err == nil || err.Error() != tc.errContains {
					t.Fatalf("Handler = %q, %v; want the error %q", got, err, tc.errContains)
				}
				if tc.notFound && !apierrors.IsNotFound(err) {
					t.Errorf("error %v is not the API server's NotFound", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Handler = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// A RuntimeClass created, changed or deleted after the pod is seen reaches
// the lookup through the watch: the kubelet's retried sandbox creation then
// succeeds (or fails again).
func TestManager_Handler_followsTheWatch(t *testing.T) {
	client := fake.NewClientset()
	m := New(Config{Client: client})
	run(t, m)
	p := pod(ptr("late"))
	eventually(t, "informer sync", func() error {
		_, err := m.Handler(p)
		if errors.Is(err, ErrNotSynced) {
			return err
		}
		return nil
	})
	if _, err := m.Handler(p); !apierrors.IsNotFound(err) {
		t.Fatalf("before the RuntimeClass exists: %v; want NotFound", err)
	}

	ctx := context.Background()
	rcs := client.NodeV1().RuntimeClasses()
	if _, err := rcs.Create(ctx, runtimeClass("late", "runc2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "created RuntimeClass seen", func() error {
		h, err := m.Handler(p)
		if err == nil && h != "runc2" {
			t.Fatalf("handler %q, want runc2", h)
		}
		return err
	})

	// node.k8s.io/v1 RuntimeClass.handler is immutable in a real API
	// server; the fake takes the update, which shows lookups read the
	// watched object, not a copy taken once.
	if _, err := rcs.Update(ctx, runtimeClass("late", "runc"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "updated RuntimeClass seen", func() error {
		h, err := m.Handler(p)
		if err == nil && h != "runc" {
			return errors.New("handler still " + h)
		}
		return err
	})

	if err := rcs.Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted RuntimeClass gone", func() error {
		if _, err := m.Handler(p); !apierrors.IsNotFound(err) {
			return errors.New("still resolved")
		}
		return nil
	})
}

// Before the informer's first list a lookup says so (the pod's sync is
// retried) instead of reporting a RuntimeClass that exists as not found.
func TestManager_Handler_notSynced(t *testing.T) {
	m := New(Config{Client: fake.NewClientset(runtimeClass("plain", "runc"))})
	// Run not called: the cache never syncs.
	_, err := m.Handler(pod(ptr("plain")))
	if !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Handler before sync: %v; want ErrNotSynced", err)
	}
	if !strings.Contains(err.Error(), `"plain"`) {
		t.Errorf("error %q does not name the RuntimeClass", err)
	}
	// A pod naming no RuntimeClass needs no cache.
	if h, err := m.Handler(pod(nil)); h != "" || err != nil {
		t.Errorf("Handler(no class) before sync = %q, %v; want \"\", nil", h, err)
	}
}

func TestManager_Handler_standalone(t *testing.T) {
	m := New(Config{})
	run(t, m) // returns at once on cancel: nothing to start
	if h, err := m.Handler(pod(nil)); h != "" || err != nil {
		t.Fatalf("Handler(no class) = %q, %v; want \"\", nil", h, err)
	}
	_, err := m.Handler(pod(ptr("gvisor")))
	if !errors.Is(err, ErrStandalone) {
		t.Fatalf("Handler standalone: %v; want ErrStandalone", err)
	}
	for _, want := range []string{"ns/p", "spec.runtimeClassName", `"gvisor"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
