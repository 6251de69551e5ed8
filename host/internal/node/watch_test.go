package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWatcher: the node's labels as the API server has them, a callback
// when they change (and when the node is first seen), none when only its
// status changes.
func TestWatcher(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}})
	w := NewWatcher(client, "n1")
	var calls atomic.Int32
	w.OnLabelsChange(func() { calls.Add(1) })
	go w.Run(ctx)
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("the node seen", func() bool { n, ok := w.Node(); return ok && n.Labels["pool"] == "a" && calls.Load() == 1 })

	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the status change seen", func() bool { n, _ := w.Node(); return len(n.Status.Conditions) == 1 })
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Labels["pool"] = "b"
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("the new label seen", func() bool { n, _ := w.Node(); return n.Labels["pool"] == "b" })
	if got := calls.Load(); got != 2 {
		t.Errorf("label callbacks = %d, want 2 (first seen, pool a→b; none for the status change)", got)
	}
}
