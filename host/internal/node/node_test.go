package node

import (
	"os"
	"path/filepath"
	"runtime"
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
		Reserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}})
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
		{"hostname label", n.Labels[v1.LabelHostname], "n1"},
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
