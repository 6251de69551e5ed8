package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, texts []string) string {
		var b strings.Builder
		for i, s := range texts {
			fmt.Fprintf(&b, "2026-11-21T09:00:00.%09dZ stderr F %s\n", i, s)
		}
		b.WriteString("2026-11-21T09:00:01.000000000Z stderr\n") // no text: skipped
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	want := func(texts []string, lines, maxBytes int) string {
		if len(texts) > lines {
			texts = texts[len(texts)-lines:]
		}
		s := strings.Join(texts, "\n")
		if len(s) > maxBytes {
			s = s[len(s)-maxBytes:]
		}
		return s
	}
	small := []string{"first line", "with spaces in it", "last"}
	var big []string // a log far larger than what the tail needs
	for i := 0; i < 20000; i++ {
		big = append(big, fmt.Sprintf("line %d of a long log", i))
	}
	for _, c := range []struct {
		name            string
		texts           []string
		lines, maxBytes int
	}{
		{"small", small, 80, 2048},
		{"small, two lines", small, 2, 2048},
		{"big, line-bound", big, 80, 1 << 20},
		{"big, byte-bound", big, 80, 2048},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := logTail(write(strings.ReplaceAll(c.name, " ", ""), c.texts), c.lines, c.maxBytes)
			if w := want(c.texts, c.lines, c.maxBytes); got != w {
				t.Errorf("logTail = %q\nwant %q", got, w)
			}
		})
	}
	if got := logTail(filepath.Join(dir, "missing"), 80, 2048); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

func TestWriteHostsFile(t *testing.T) {
	dir := t.TempDir()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns"}, Spec: v1.PodSpec{
		Hostname: "web", Subdomain: "sub",
		HostAliases: []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"a", "b"}}, {IP: "5.6.7.8", Hostnames: []string{"c"}}},
	}}
	path, err := writeHostsFile(dir, pod, []string{"10.0.0.5"}, "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{"10.0.0.5\tweb.sub.ns.svc.cluster.local\tweb\n", "\n# Entries added by HostAliases.\n1.2.3.4\ta\tb\n5.6.7.8\tc\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("hosts file lacks %q:\n%s", want, b)
		}
	}
	if strings.Count(string(b), "HostAliases") != 1 {
		t.Errorf("HostAliases header more than once:\n%s", b)
	}
	pod.Spec.SetHostnameAsFQDN = ptr.To(true)
	if h := sandboxHostname(pod, "cluster.local"); h != "web.sub.ns.svc.cluster.local" {
		t.Errorf("FQDN hostname %q", h)
	}
	if err := checkHostname(pod, "cluster.local"); err != nil {
		t.Errorf("a 28-byte FQDN refused: %v", err)
	}
	// An FQDN over 64 bytes cannot be the kernel's hostname: the sandbox
	// is refused with the kubelet's message.
	if err := checkHostname(pod, "a-cluster-domain-long-enough-to-push-the-fqdn-over.example"); err == nil ||
		!strings.HasPrefix(err.Error(), "failed to construct FQDN from pod hostname and cluster domain, FQDN web.sub.ns.svc.") {
		t.Errorf("a long FQDN: error %v", err)
	}
	pod.Spec.HostnameOverride = ptr.To("override")
	if h := sandboxHostname(pod, "cluster.local"); h != "override" {
		t.Errorf("hostnameOverride: %q", h)
	}
}

func TestSubPathTargetTakesTheVolumeMode(t *testing.T) {
	root := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o777|os.ModeSetgid|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "a", "b")
	if err := subPathTarget(root, sub); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sub)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0o777 | os.ModeSetgid | os.ModeSticky | os.ModeDir; fi.Mode() != want {
		t.Errorf("subPath mode %v, want the volume's %v", fi.Mode(), want)
	}
}

func TestManager_recursiveReadOnly(t *testing.T) {
	m, _ := newTestManager(t)
	pod := testPod("u1", v1.RestartPolicyAlways, "app")
	mode := func(mo v1.RecursiveReadOnlyMode) *v1.RecursiveReadOnlyMode { return &mo }
	prop := v1.MountPropagationHostToContainer
	for _, tc := range []struct {
		name      string
		supported *bool // nil: the runtime said nothing
		vm        v1.VolumeMount
		want      bool
		err       string
	}{
		{name: "unset", vm: v1.VolumeMount{Name: "v", ReadOnly: true}},
		{name: "disabled", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)}},
		{name: "if possible, supported", supported: ptr.To(true), vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}, want: true},
		{name: "if possible, not supported", supported: ptr.To(false), vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}},
		{name: "enabled, supported", supported: ptr.To(true), vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)}, want: true},
		{name: "enabled, unknown runtime", vm: v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			err: `volume "v" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "enabled, not read-only", supported: ptr.To(true), vm: v1.VolumeMount{Name: "v", RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			err: `volume "v" requested recursive read-only mode, but it is not read-only`},
		{name: "enabled, propagation", supported: ptr.To(true), vm: v1.VolumeMount{Name: "v", ReadOnly: true, MountPropagation: &prop, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			err: `volume "v" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.rroHandlers.Store(nil)
			if tc.supported != nil {
				m.rroHandlers.Store(&map[string]bool{"": *tc.supported})
			}
			got, err := m.recursiveReadOnly(pod, tc.vm)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
