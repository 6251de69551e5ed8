package kubeletconfig

import (
	"os/exec"
	"strings"
	"testing"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// shell renders values with kubelet_config of hack/lib/kubelet-config.sh.
func shell(t *testing.T, values map[string]string) (string, error) {
	t.Helper()
	args := []string{"-c", `set -euo pipefail; . ../lib/kubelet-config.sh; kubelet_config "$@"`, "kubelet_config"}
	for k, v := range values {
		args = append(args, k+"="+v)
	}
	out, err := exec.Command("bash", args...).Output()
	return string(out), err
}

// TestRender: Go and the shell render the template alike, and what they
// render is a KubeletConfiguration the kubelet's strict decoding accepts.
func TestRender(t *testing.T) {
	tests := []struct {
		name       string
		values     map[string]string
		has, lacks []string
	}{
		{"standalone", map[string]string{
			"containerRuntimeEndpoint": "unix:///c.sock", "staticPodPath": "/m", "podLogsDir": "/logs",
			"anonymousEnabled": "true", "webhookEnabled": "false", "authorizationMode": "AlwaysAllow",
			"readOnlyPort": "0", "port": "0", "healthzPort": "0", "clusterDomain": "cluster.local", "clusterDNS": "10.96.0.10",
		}, []string{"staticPodPath: /m\n", "  anonymous: {enabled: true}\n", "readOnlyPort: 0\n", "clusterDNS: [10.96.0.10]\n"},
			[]string{"x509", "address:", "#", "${"}},
		{"cluster node", map[string]string{
			"containerRuntimeEndpoint": "unix:///c.sock", "podLogsDir": "/logs",
			"anonymousEnabled": "false", "webhookEnabled": "true", "clientCAFile": "/ca & co", "authorizationMode": "Webhook",
			"address": "10.0.0.7", "port": "10250", "readOnlyPort": "0",
		}, []string{"  x509: {clientCAFile: /ca & co}\n", "authorization: {mode: Webhook}\n", "address: 10.0.0.7\n"},
			[]string{"staticPodPath", "healthzPort", "clusterDomain", "#", "${"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.values)
			if err != nil {
				t.Fatal(err)
			}
			sh, err := shell(t, tt.values)
			if err != nil {
				t.Fatalf("kubelet_config: %v", err)
			}
			if sh != got {
				t.Errorf("the shell renders\n%s\nGo renders\n%s", sh, got)
			}
			for _, s := range tt.has {
				if !strings.Contains(got, s) {
					t.Errorf("no %q in\n%s", s, got)
				}
			}
			for _, s := range tt.lacks {
				if strings.Contains(got, s) {
					t.Errorf("%q in\n%s", s, got)
				}
			}
			var c kubeletconfig.KubeletConfiguration
			if err := yaml.UnmarshalStrict([]byte(got), &c); err != nil {
				t.Errorf("not a KubeletConfiguration: %v\n%s", err, got)
			}
			if c.ContainerRuntimeEndpoint != "unix:///c.sock" || c.PodLogsDir != "/logs" || c.CgroupDriver != "cgroupfs" {
				t.Errorf("decoded %+v", c)
			}
		})
	}
}

func TestRender_unknownName(t *testing.T) {
	values := map[string]string{"containerRuntimeEndpoint": "unix:///c.sock", "readOnlyPrt": "0"}
	if _, err := Render(values); err == nil || !strings.Contains(err.Error(), "${readOnlyPrt}") {
		t.Errorf("Render: %v", err)
	}
	if out, err := shell(t, values); err == nil {
		t.Errorf("kubelet_config succeeded: %q", out)
	}
}
