package mirror

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/pod"
)

var testNode = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}

func staticPod(hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: types.UID(hash),
			Annotations: map[string]string{config.AnnotationSource: config.FileSource, config.AnnotationHash: hash}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}},
	}
}

// mirrorOf is the mirror as the API source would deliver it.
func mirrorOf(static *v1.Pod, uid string) *v1.Pod {
	m := Mirror(static, testNode)
	m.UID = types.UID(uid)
	m.Annotations[config.AnnotationSource] = config.APIServerSource
	return m
}

func TestMirror(t *testing.T) {
	s := staticPod("h1")
	m := Mirror(s, testNode)
	if m.Annotations[config.AnnotationMirror] != "h1" || m.Annotations[config.AnnotationHash] != "h1" {
		t.Errorf("annotations %v: want config.mirror = the hash, and the static pod's own", m.Annotations)
	}
	if len(m.OwnerReferences) != 1 {
		t.Fatalf("owner references %v, want one", m.OwnerReferences)
	}
	o := m.OwnerReferences[0]
	if o.Kind != "Node" || o.APIVersion != "v1" || o.Name != "n1" || o.UID != "node-uid" || o.Controller == nil || !*o.Controller {
		t.Errorf("owner %+v: want the Node n1 (node-uid) as controller", o)
	}
	if m.UID != "" || m.Spec.NodeName != "n1" || m.Spec.ServiceAccountName != "" {
		t.Errorf("mirror uid %q nodeName %q serviceAccount %q: want none, n1, none", m.UID, m.Spec.NodeName, m.Spec.ServiceAccountName)
	}
	m.Annotations["x"] = "y"
	if _, ok := s.Annotations["x"]; ok {
		t.Error("Mirror shares the static pod's annotations map")
	}
}

func TestManager_Sync(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		statics    []*v1.Pod
		mirrors    []*v1.Pod
		registered bool
		// started are the pods the workers have started and not yet
		// terminated.
		started []*v1.Pod
		creates int
		deletes int
	}{
		{name: "not registered: nothing", statics: []*v1.Pod{staticPod("h1")}},
		{name: "missing mirror created", statics: []*v1.Pod{staticPod("h1")}, registered: true, creates: 1},
		{name: "matching mirror kept", statics: []*v1.Pod{staticPod("h1")}, mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")}, registered: true},
		{name: "outdated mirror replaced", statics: []*v1.Pod{staticPod("h2")}, mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")}, registered: true, creates: 1, deletes: 1},
		{name: "orphaned mirror deleted", mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")}, registered: true, deletes: 1},
		{name: "mirror of a removed static pod kept while it terminates", mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")},
			started: []*v1.Pod{staticPod("h1")}, registered: true},
		{name: "mirror of a replaced static pod kept while the old one terminates", statics: []*v1.Pod{staticPod("h2")},
			mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")}, started: []*v1.Pod{staticPod("h1")}, registered: true},
		{name: "a terminating API pod of another name keeps nothing", mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")},
			started: []*v1.Pod{apiPod("other")}, registered: true, deletes: 1},
		{name: "mirror kept while the static pod it mirrors runs and its replacement waits", statics: []*v1.Pod{staticPod("h1"), staticPod("h2")},
			mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")}, started: []*v1.Pod{staticPod("h1")}, registered: true},
		{name: "outdated mirror replaced once the replaced static pod is done", statics: []*v1.Pod{staticPod("h2")},
			mirrors: []*v1.Pod{mirrorOf(staticPod("h1"), "m1")}, started: []*v1.Pod{staticPod("h2")}, registered: true, creates: 1, deletes: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pm := pod.New()
			for _, p := range append(append([]*v1.Pod{}, c.statics...), c.mirrors...) {
				pm.AddPod(p)
			}
			client := fake.NewClientset()
			for _, m := range c.mirrors {
				if _, err := client.CoreV1().Pods(m.Namespace).Create(ctx, m, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			client.ClearActions()
			mgr := New(Config{Client: client, Pods: pm, Node: func() (*v1.Node, bool) { return testNode, c.registered },
				Started: func() []*v1.Pod { return c.started }})
			mgr.Sync(ctx)
			// A second pass before the watch shows anything adds nothing.
			mgr.Sync(ctx)
			creates, deletes := 0, 0
			for _, a := range client.Actions() {
				switch a.GetVerb() {
				case "create":
					creates++
				case "delete":
					deletes++
				}
			}
			if creates != c.creates || deletes != c.deletes {
				t.Errorf("creates %d deletes %d, want %d and %d", creates, deletes, c.creates, c.deletes)
			}
			if c.creates > 0 {
				got, err := client.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Annotations[config.AnnotationMirror] != pod.Hash(c.statics[0]) {
					t.Errorf("created mirror's config.mirror %q, want %q", got.Annotations[config.AnnotationMirror], pod.Hash(c.statics[0]))
				}
			}
		})
	}
}

// apiPod is a pod from the API server named name.
func apiPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("api-" + name),
		Annotations: map[string]string{config.AnnotationSource: config.APIServerSource}}}
}
