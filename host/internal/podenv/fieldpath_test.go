package podenv

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns1", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{
				"example.com/quote":     `say "hi"`,
				"multi":                 "a\nb\tc\\",
				"unicode":               "é☃",
				"Upper.example.com/Key": "up",
			},
		},
		Spec: v1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa"},
	}
}

func TestFieldValue(t *testing.T) {
	pod := testPod()
	podIPs := []string{"10.0.0.5", "fd00::5"}
	hostIPs := []string{"192.168.1.2", "fd00::2"}
	for _, tc := range []struct {
		path, want, err string
	}{
		{path: "metadata.name", want: "web"},
		{path: "metadata.namespace", want: "ns1"},
		{path: "metadata.uid", want: "uid-1"},
		{path: "metadata.labels", want: "app=\"web\"\ntier=\"front\""},
		{path: "metadata.annotations", want: "Upper.example.com/Key=\"up\"\n" +
			`example.com/quote="say \"hi\""` + "\n" +
			`multi="a\nb\tc\\"` + "\n" +
			`unicode="é☃"`},
		{path: "metadata.labels['app']", want: "web"},
		{path: "metadata.labels['absent']", want: ""},
		{path: "metadata.annotations['example.com/quote']", want: `say "hi"`},
		{path: "metadata.annotations['Upper.example.com/Key']", want: "up"},
		{path: "metadata.annotations['absent']", want: ""},
		{path: "spec.nodeName", want: "node-1"},
		{path: "spec.host", want: "node-1"},
		{path: "spec.serviceAccountName", want: "sa"},
		{path: "status.hostIP", want: "192.168.1.2"},
		{path: "status.hostIPs", want: "192.168.1.2,fd00::2"},
		{path: "status.podIP", want: "10.0.0.5"},
		{path: "status.podIPs", want: "10.0.0.5,fd00::5"},
		{path: "metadata.labels['a b']", err: "invalid key subscript in metadata.labels['a b']: "},
		{path: "metadata.labels['']", err: "invalid key subscript in metadata.labels['']: "},
		{path: "metadata.name['x']", err: "field label does not support subscript: metadata.name['x']"},
		{path: "spec.restartPolicy", err: "unsupported fieldPath: spec.restartPolicy"},
		{path: "status.phase", err: "unsupported fieldPath: status.phase"},
		{path: "spec.nope", err: "field label not supported: spec.nope"},
		{path: "", err: "field label not supported: "},
	} {
		got, err := FieldValue(pod, tc.path, podIPs, hostIPs)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: got %q, %v; want error %q", tc.path, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
}

func TestFieldValueIPs(t *testing.T) {
	pod := testPod()
	for _, tc := range []struct {
		name            string
		podIPs, hostIPs []string
		path, want, err string
	}{
		{name: "v6 node puts v6 first", podIPs: []string{"10.0.0.5", "fd00::5"}, hostIPs: []string{"fd00::2"},
			path: "status.podIPs", want: "fd00::5,10.0.0.5"},
		{name: "v6 node podIP", podIPs: []string{"10.0.0.5", "fd00::5"}, hostIPs: []string{"fd00::2"},
			path: "status.podIP", want: "fd00::5"},
		{name: "no host IPs means v4 first", podIPs: []string{"fd00::5", "10.0.0.5"},
			path: "status.podIPs", want: "10.0.0.5,fd00::5"},
		{name: "one per family, re-formatted", podIPs: []string{"010.000.000.005", "10.0.0.6", "FD00:0::5"},
			hostIPs: []string{"1.2.3.4"}, path: "status.podIPs", want: "10.0.0.5,fd00::5"},
		{name: "no pod IPs", hostIPs: []string{"1.2.3.4"}, path: "status.podIP", want: ""},
		{name: "no pod IPs list", path: "status.podIPs", want: ""},
		{name: "single host IP", hostIPs: []string{"1.2.3.4"}, path: "status.hostIPs", want: "1.2.3.4"},
		{name: "no host IP", path: "status.hostIP", err: "host IP unknown"},
		{name: "no host IPs", path: "status.hostIPs", err: "host IP unknown"},
	} {
		got, err := FieldValue(pod, tc.path, tc.podIPs, tc.hostIPs)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: got %q, %v; want error %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestFormatMap(t *testing.T) {
	for _, tc := range []struct {
		m    map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{}, ""},
		{map[string]string{"k": ""}, `k=""`},
		{map[string]string{"b": "2", "a": "1"}, "a=\"1\"\nb=\"2\""},
		{map[string]string{"k": "line1\nline2"}, `k="line1\nline2"`},
		{map[string]string{"k": `back\slash "q"`}, `k="back\\slash \"q\""`},
		{map[string]string{"k": "\x00\x7f"}, `k="\x00\x7f"`},
		{map[string]string{"k": "\xff"}, `k="\xff"`},
		{map[string]string{"k": "héllo"}, `k="héllo"`},
	} {
		if got := FormatMap(tc.m); got != tc.want {
			t.Errorf("FormatMap(%q) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
