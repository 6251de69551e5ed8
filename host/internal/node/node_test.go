package node

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func fakeRoot(t *testing.T, meminfo string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"proc/meminfo":                   "MemTotal:        8048576 kB\nMemFree: 1 kB\n",
		"etc/machine-id":                 "abc123\n",
		"proc/sys/kernel/random/boot_id": "boot-1\n",
		"proc/sys/kernel/osrelease":      "6.1.0-test\n",
		"etc/os-release":                 "NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
	}
	if meminfo != "" {
		files["proc/meminfo"] = meminfo
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestNew(t *testing.T) {
	root := fakeRoot(t, "")
	n, err := New(Config{Name: "n1", MaxPods: 20, ProcRoot: root, AgentVersion: "wasmlet/v0.1.0", RuntimeVersion: "containerd://1.6.20",
		Allocatable: func(c v1.ResourceList) (v1.ResourceList, error) {
			a := c.DeepCopy()
			m := a[v1.ResourceMemory]
			m.Sub(resource.MustParse("1Gi"))
			a[v1.ResourceMemory] = m
			return a, nil
		},
		Labels:     map[string]string{"pool": "gpu", v1.LabelHostname: "h1"},
		Taints:     []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}},
		ProviderID: "p://1",
	})
	if err != nil {
		t.Fatal(err)
	}
	mem := n.Status.Capacity[v1.ResourceMemory]
	alloc := n.Status.Allocatable[v1.ResourceMemory]
	pods := n.Status.Allocatable[v1.ResourcePods]
	cpu := n.Status.Capacity[v1.ResourceCPU]
	tests := []struct {
		name      string
		got, want any
	}{
		{"name", n.Name, "n1"},
		{"hostname label, as --node-labels set it", n.Labels[v1.LabelHostname], "h1"},
		{"pool label", n.Labels["pool"], "gpu"},
		{"os label", n.Labels[v1.LabelOSStable], runtime.GOOS},
		{"taint", n.Spec.Taints[0].ToString(), "dedicated=gpu:NoSchedule"},
		{"provider ID", n.Spec.ProviderID, "p://1"},
		{"memory", mem.Value(), int64(8048576 * 1024)},
		{"allocatable memory", alloc.Value(), int64(8048576*1024 - 1<<30)},
		{"pods", pods.Value(), int64(20)},
		{"cpu", cpu.Value(), int64(runtime.NumCPU())},
		{"machine id", n.Status.NodeInfo.MachineID, "abc123"},
		{"boot id", n.Status.NodeInfo.BootID, "boot-1"},
		{"kernel", n.Status.NodeInfo.KernelVersion, "6.1.0-test"},
		{"os image", n.Status.NodeInfo.OSImage, "Debian GNU/Linux 12 (bookworm)"},
		{"runtime", n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://1.6.20"},
		{"agent", n.Status.NodeInfo.KubeletVersion, "wasmlet/v0.1.0"},
		{"os", n.Status.NodeInfo.OperatingSystem, runtime.GOOS},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if _, ok := n.Status.Capacity[v1.ResourceEphemeralStorage]; !ok {
		t.Error("no ephemeral-storage capacity")
	}
	hasHost := false
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeHostName && a.Address != "" {
			hasHost = true
		}
	}
	if !hasHost {
		t.Errorf("no Hostname address in %v", n.Status.Addresses)
	}
}

func TestNew_allocatableError(t *testing.T) {
	_, err := New(Config{Name: "n", ProcRoot: fakeRoot(t, ""), Allocatable: func(v1.ResourceList) (v1.ResourceList, error) {
		return nil, errors.New(`resource "cpu" has a reservation of 5 but a capacity of 4`)
	}})
	if err == nil || !strings.Contains(err.Error(), `resource "cpu"`) {
		t.Fatalf("error %v", err)
	}
}

func TestInternalIPs(t *testing.T) {
	host := []net.IP{net.ParseIP("fe80::1"), net.ParseIP("10.0.0.5"), net.ParseIP("fd00::5"), net.ParseIP("192.168.1.2")}
	tests := []struct {
		name    string
		nodeIPs []string
		want    []string
		wantErr string
	}{
		{"none: the first IPv4", nil, []string{"10.0.0.5"}, ""},
		{"one given", []string{"192.168.1.2"}, []string{"192.168.1.2"}, ""},
		{"dual-stack, IPv6 primary", []string{"fd00::5", "10.0.0.5"}, []string{"fd00::5", "10.0.0.5"}, ""},
		{"unspecified IPv6: the first global one", []string{"::"}, []string{"fd00::5"}, ""},
		{"unspecified pair", []string{"0.0.0.0", "::"}, []string{"10.0.0.5", "fd00::5"}, ""},
		{"not the host's", []string{"10.9.9.9"}, nil, `node IP "10.9.9.9" not found in the host's network interfaces`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := internalIPs(tt.nodeIPs, host)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestNew_errors(t *testing.T) {
	for name, meminfo := range map[string]string{"no MemTotal": "MemFree: 1 kB\n", "bad MemTotal": "MemTotal: x kB\n"} {
		if _, err := New(Config{Name: "n", ProcRoot: fakeRoot(t, meminfo)}); err == nil || !strings.Contains(err.Error(), "meminfo") {
			t.Errorf("%s: error %v, want one naming meminfo", name, err)
		}
	}
	if _, err := New(Config{Name: "n", ProcRoot: t.TempDir()}); err == nil {
		t.Error("missing meminfo: no error")
	}
}

func TestNew_defaults(t *testing.T) {
	n, err := New(Config{ProcRoot: fakeRoot(t, "")})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := os.Hostname()
	if n.Name != strings.ToLower(h) {
		t.Errorf("default name %q, host %q", n.Name, h)
	}
	if p := n.Status.Capacity[v1.ResourcePods]; p.Value() != 110 {
		t.Errorf("default pods %v", p.Value())
	}
}
