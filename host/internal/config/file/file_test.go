package file

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: web
    image: busybox:1.36
    command: [sleep, "3600"]
`

const webJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"api","namespace":"kube-system"},
"spec":{"containers":[{"name":"api","image":"busybox"}]}}`

func TestDecode(t *testing.T) {
	tests := []struct {
		name, content, wantErr string
	}{
		{"yaml", webYAML, ""},
		{"json", webJSON, ""},
		{"empty", "  \n", "empty manifest"},
		{"not yaml", "{{{", "error converting YAML"},
		{"not a pod", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", `want kind Pod`},
		{"no name", "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}\n", "metadata.name is empty"},
		{"no containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "spec.containers is empty"},
		{"two documents", webYAML + "---\n" + webYAML, "2 YAML documents"},
		{"separator and comments around one document", "# head\n---\n" + webYAML + "---\n# tail\n", ""},
		{"refused by the API server's rules", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i, ports: [{containerPort: 0}]}]}\n", "spec.containers[0].ports[0].containerPort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(tt.content), "/etc/pods/x.yaml", "n1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "/etc/pods/x.yaml") {
					t.Fatalf("error %v, want one naming the file and containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(string(p.UID)) {
				t.Errorf("UID %q is not 32 hex digits", p.UID)
			}
			if p.Annotations[config.AnnotationHash] != string(p.UID) {
				t.Errorf("hash annotation %q, UID %q", p.Annotations[config.AnnotationHash], p.UID)
			}
			if !strings.HasSuffix(p.Name, "-n1") || p.Spec.NodeName != "n1" {
				t.Errorf("name %q nodeName %q", p.Name, p.Spec.NodeName)
			}
			if p.Namespace == "" || p.Status.Phase != v1.PodPending {
				t.Errorf("namespace %q phase %q", p.Namespace, p.Status.Phase)
			}
			c := p.Spec.Containers[0]
			if c.TerminationMessagePath != "/dev/termination-log" || c.ImagePullPolicy == "" ||
				*p.Spec.TerminationGracePeriodSeconds != 30 || p.Spec.RestartPolicy != v1.RestartPolicyAlways {
				t.Errorf("defaults missing: %+v %+v", c, p.Spec)
			}
		})
	}
}

func TestDecode_UID(t *testing.T) {
	a, _ := Decode([]byte(webYAML), "/p/web.yaml", "n1")
	b, _ := Decode([]byte(webYAML), "/p/web.yaml", "n1")
	if a.UID != b.UID {
		t.Errorf("same content, different UIDs %s %s", a.UID, b.UID)
	}
	for _, o := range []struct{ content, path, node string }{
		{strings.Replace(webYAML, "3600", "3601", 1), "/p/web.yaml", "n1"},
		{webYAML, "/p/web.yaml", "n2"},
		{webYAML, "/p/other.yaml", "n1"},
	} {
		c, _ := Decode([]byte(o.content), o.path, o.node)
		if c.UID == a.UID {
			t.Errorf("%s on %s: same UID as the original", o.path, o.node)
		}
	}
}

// collector records what a source sends and keeps the merged view.
type collector struct {
	mu   sync.Mutex
	pods map[string]*v1.Pod // by name
	ops  []string
}

func (c *collector) run(ch <-chan config.PodUpdate) {
	for u := range ch {
		c.mu.Lock()
		c.ops = append(c.ops, string(u.Op))
		if u.Op == config.OpSet {
			c.pods = map[string]*v1.Pod{}
		}
		for _, p := range u.Pods {
			if u.Op == config.OpRemove {
				if cur, ok := c.pods[p.Name]; ok && cur.UID == p.UID {
					delete(c.pods, p.Name)
				}
				continue
			}
			c.pods[p.Name] = p
		}
		c.mu.Unlock()
	}
}

func (c *collector) state() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n, p := range c.pods {
		out = append(out, n+"="+p.Spec.Containers[0].Image)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (c *collector) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.state() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %q, want %q", c.state(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pod(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  containers: [{name: c, image: %q}]\n", name, image)
}

func TestSource_Run(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		// Write then rename, as careful tools do, so the watch never sees
		// half a file.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", pod("a", "img:1"))
	write("bad.yaml", "kind: [")
	var logs syncbuf.Buffer
	s := New(Config{Path: dir, NodeName: "n1", CheckFrequency: time.Hour,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	ch := make(chan config.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- s.Run(ctx, ch); close(ch) }()
	var c collector
	go c.run(ch)

	c.waitFor(t, "a-n1=img:1")
	if !strings.Contains(logs.String(), filepath.Join(dir, "bad.yaml")) {
		t.Errorf("bad file not named in the log:\n%s", logs.String())
	}
	write("b.yaml", pod("b", "img:1"))
	c.waitFor(t, "a-n1=img:1 b-n1=img:1")
	write("a.yaml", pod("a", "img:2"))
	c.waitFor(t, "a-n1=img:2 b-n1=img:1")
	// A bad edit keeps the last good pod.
	write("a.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n")
	time.Sleep(100 * time.Millisecond)
	c.waitFor(t, "a-n1=img:2 b-n1=img:1")
	write("bad.yaml", pod("fixed", "img:1"))
	c.waitFor(t, "a-n1=img:2 b-n1=img:1 fixed-n1=img:1")
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "a-n1=img:2 fixed-n1=img:1")
	// A second file with a pod of a name already held is skipped, naming
	// both files; the first keeps its pod.
	write("z-dup.yaml", pod("fixed", "img:dup"))
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "z-dup.yaml") {
		if time.Now().After(deadline) {
			t.Fatalf("duplicate not logged:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.waitFor(t, "a-n1=img:2 fixed-n1=img:1")
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run returned %v", err)
	}
	if c.ops[0] != string(config.OpSet) {
		t.Errorf("first op %s, want SET", c.ops[0])
	}
}

func TestSource_scan_duplicates(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"a.yaml": pod("same", "img:a"), "b.yaml": pod("same", "img:b"), "c.yaml": pod("other", "img:c")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncbuf.Buffer
	s := New(Config{Path: dir, NodeName: "n1", Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	var got []string
	for _, p := range s.scan() {
		got = append(got, p.Name+"="+p.Spec.Containers[0].Image)
	}
	if fmt.Sprint(got) != "[same-n1=img:a other-n1=img:c]" {
		t.Errorf("scan %v", got)
	}
	if !strings.Contains(logs.String(), "b.yaml") || !strings.Contains(logs.String(), "a.yaml") {
		t.Errorf("duplicate log does not name both files:\n%s", logs.String())
	}
}

func TestSource_Run_periodicSet(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(pod("a", "img:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Path: filepath.Join(dir, "missing"), NodeName: "n1", CheckFrequency: 30 * time.Millisecond})
	ch := make(chan config.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx, ch); close(ch) }()
	var c collector
	go c.run(ch)
	time.Sleep(50 * time.Millisecond)
	c.waitFor(t, "")
	// The directory appears later: the periodic re-check finds it.
	if err := os.Rename(dir, dir+"-x"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+"-x", filepath.Join(dir, "missing")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, "a-n1=img:1")
}

func BenchmarkDecode(b *testing.B) {
	for b.Loop() {
		if _, err := Decode([]byte(webYAML), "/p/web.yaml", "n1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSource_Run_burst1000 measures 1,000 manifests written into a
// watched directory until the source has sent all 1,000 pods.
func BenchmarkSource_Run_burst1000(b *testing.B) {
	const n = 1000
	var total time.Duration
	for b.Loop() {
		dir := b.TempDir()
		s := New(Config{Path: dir, NodeName: "n1", CheckFrequency: time.Hour})
		ch := make(chan config.PodUpdate)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = s.Run(ctx, ch) }()
		if u := <-ch; len(u.Pods) != 0 {
			b.Fatalf("initial SET of %d pods", len(u.Pods))
		}
		start := time.Now()
		got := map[string]bool{}
		go func() {
			for i := range n {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("p%04d.yaml", i)), []byte(pod(fmt.Sprintf("p%04d", i), "img:1")), 0o644)
			}
		}()
		for len(got) < n {
			u := <-ch
			for _, p := range u.Pods {
				got[p.Name] = true
			}
		}
		total += time.Since(start)
		cancel()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "pods/s")
}

// FuzzDecode checks that no manifest makes Decode panic, and that every pod
// it accepts is a valid static pod of the node that the API server would
// accept too.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(webYAML))
	f.Add([]byte(webJSON))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"))
	f.Add([]byte("kind: ["))
	f.Add([]byte(webYAML + "---\n" + webJSON))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x, annotations: {a: b}}\nspec: {containers: [{name: c, image: i, resources: {limits: {cpu: -1}}}]}\n"))
	uid := regexp.MustCompile(`^[0-9a-f]{32}$`)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b, "/p/f.yaml", "n1")
		if err != nil {
			if !strings.Contains(err.Error(), "/p/f.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		if err := config.Validate(p); err != nil {
			t.Errorf("accepted an invalid pod: %v", err)
		}
		if err := config.ValidateStatic(p); err != nil {
			t.Errorf("accepted a pod the API server would refuse: %v", err)
		}
		if !strings.HasSuffix(p.Name, "-n1") || p.Spec.NodeName != "n1" || p.Annotations[config.AnnotationHash] != string(p.UID) {
			t.Errorf("not a static pod of n1: %s %s %v", p.Name, p.Spec.NodeName, p.Annotations)
		}
		if p.UID == "" || (!uid.MatchString(string(p.UID)) && !bytes.Contains(b, []byte(p.UID))) {
			t.Errorf("UID %q neither a hash nor from the manifest", p.UID)
		}
	})
}

// TestSource_Run_badPaths puts every kind of bad path into the manifest
// directory beside good manifests: each is named once in the log however
// often the directory is re-read, none blocks the source (a FIFO is never
// opened), and good manifests written later still load.
func TestSource_Run_badPaths(t *testing.T) {
	dir := t.TempDir()
	in := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(in(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(in("a-fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in("nowhere.yaml"), in("b-dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in("c-loop.yaml"), in("c-loop.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(in("d-dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("e-two-docs.yaml", pod("two", "img:1")+"---\n"+pod("three", "img:1"))
	write("f-invalid.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: inv}\nspec:\n  containers: [{name: Bad_Name, image: img}]\n")
	write("g-huge.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: huge\n  annotations: {big: "+strings.Repeat("x", 300<<10)+"}\nspec:\n  containers: [{name: c, image: img}]\n")
	write("h-good.yaml", pod("good", "img:1"))
	write("i-dup.yaml", pod("good", "img:dup"))
	var logs syncbuf.Buffer
	s := New(Config{Path: dir, NodeName: "n1", CheckFrequency: 10 * time.Millisecond,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	ch := make(chan config.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ch); close(ch) }()
	var c collector
	go c.run(ch)

	c.waitFor(t, "good-n1=img:1")
	write("z-later.yaml", pod("later", "img:1"))
	c.waitFor(t, "good-n1=img:1 later-n1=img:1")
	// Let the source re-read the directory many times.
	for n := strings.Count(c.opsString(), "SET"); strings.Count(c.opsString(), "SET") < n+10; {
		time.Sleep(5 * time.Millisecond)
	}
	bad := map[string]string{
		"a-fifo.yaml":     "not a regular file",
		"b-dangling.yaml": "cannot stat",
		"c-loop.yaml":     "cannot stat",
		"d-dir.yaml":      "not a regular file",
		"e-two-docs.yaml": "2 YAML documents",
		"f-invalid.yaml":  "spec.containers[0].name",
		"g-huge.yaml":     "metadata.annotations: Too long",
		"i-dup.yaml":      "same name",
	}
	lines := strings.Split(logs.String(), "\n")
	for name, want := range bad {
		var named []string
		for _, l := range lines {
			if strings.Contains(l, " file="+in(name)) {
				named = append(named, l)
			}
		}
		if len(named) != 1 || !strings.Contains(named[0], want) {
			t.Errorf("%s: %d log lines naming it, want one saying %q:\n%s", name, len(named), want, strings.Join(named, "\n"))
		}
	}
	for _, name := range []string{"h-good.yaml", "z-later.yaml"} {
		if strings.Contains(logs.String(), " file="+in(name)) {
			t.Errorf("good manifest %s named in the log:\n%s", name, logs.String())
		}
	}
	// Fixed, a path is loaded; broken again, it is named again.
	if err := os.Remove(in("b-dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in("h-good.yaml"), in("b-dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	write("h-good.yaml", pod("linked", "img:1"))
	// i-dup.yaml holds the only "good" pod now; h-good.yaml and the
	// link to it hold the same pod, the link (first by name) wins.
	c.waitFor(t, "good-n1=img:dup later-n1=img:1 linked-n1=img:1")
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func (c *collector) opsString() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.ops, " ")
}

// TestSource_refresh_removed: a manifest removed (the watch's path) is
// dropped without a log line; a dangling symlink in its place is named.
func TestSource_refresh_removed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(p, []byte(pod("a", "img:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s := New(Config{Path: dir, NodeName: "n1", Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	if pods := s.scan(); len(pods) != 1 {
		t.Fatalf("scan: %d pods", len(pods))
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if add, remove := s.refresh(map[string]bool{p: true}); len(add) != 0 || len(remove) != 1 {
		t.Fatalf("refresh after removal: add %d, remove %d; want 0 and 1", len(add), len(remove))
	}
	if logs.String() != "" {
		t.Errorf("a removed manifest was logged:\n%s", logs.String())
	}
	if err := os.Symlink(filepath.Join(dir, "gone.yaml"), p); err != nil {
		t.Fatal(err)
	}
	s.refresh(map[string]bool{p: true})
	if !strings.Contains(logs.String(), "cannot stat") {
		t.Errorf("a dangling symlink was not named:\n%s", logs.String())
	}
}

// TestSource_refresh_recreated: a manifest removed and created again with
// the same content within one batch removes its pod and adds it again (the
// pod restarts, as on the kubelet); the same path merely written is an
// unchanged pod.
func TestSource_refresh_recreated(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(p, []byte(pod("a", "img:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Path: dir, NodeName: "n1"})
	pods := s.scan()
	if len(pods) != 1 {
		t.Fatalf("scan: %d pods", len(pods))
	}
	if add, remove := s.refresh(map[string]bool{p: false}); len(add) != 0 || len(remove) != 0 {
		t.Fatalf("refresh of an unchanged file: add %d, remove %d; want none", len(add), len(remove))
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(pod("a", "img:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	add, remove := s.refresh(map[string]bool{p: true})
	if len(add) != 1 || len(remove) != 1 || add[0].UID != pods[0].UID || remove[0].UID != pods[0].UID {
		t.Fatalf("refresh after remove and create: add %d, remove %d; want the same pod removed and added", len(add), len(remove))
	}
}
