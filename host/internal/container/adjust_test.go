package container

import (
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podConfig is a container config as a pod spec makes it.
func podConfig() *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "KEEP", Value: []byte("1")}, {Key: "DEBUG", Value: []byte("1")}},
		Mounts:      []*runtimeapi.Mount{{HostPath: "/var/lib/v", ContainerPath: "/data"}, {HostPath: "/var/lib/t", ContainerPath: "/tmp/x"}},
		Annotations: map[string]string{"a": "1", "drop": "1"},
		Labels:      map[string]string{"l": "1"},
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, MemoryLimitInBytes: 100, OomScoreAdj: 1000}},
	}
}

func TestAdjustment_ApplyContainer(t *testing.T) {
	oom := int64(-10)
	tests := []struct {
		name  string
		adj   *Adjustment
		check func(*runtimeapi.ContainerConfig) string
	}{
		{"nil changes nothing", nil, func(c *runtimeapi.ContainerConfig) string {
			if len(c.Envs) != 2 || len(c.Mounts) != 2 || c.Linux.Resources.MemoryLimitInBytes != 100 {
				return fmt.Sprintf("%v", c)
			}
			return ""
		}},
		{"removals take away what the pod set", &Adjustment{Remove: Removal{Env: []string{"DEBUG"}, Mounts: []string{"/tmp/x"}, Annotations: []string{"drop"}}},
			func(c *runtimeapi.ContainerConfig) string {
				if len(c.Envs) != 1 || c.Envs[0].Key != "KEEP" || len(c.Mounts) != 1 || c.Mounts[0].ContainerPath != "/data" || c.Annotations["drop"] != "" || c.Annotations["a"] != "1" {
					return fmt.Sprintf("envs %v mounts %v annotations %v", c.Envs, c.Mounts, c.Annotations)
				}
				return ""
			}},
		{"env replaces, mounts replace by path, devices and CDI added", &Adjustment{
			Env:        []EnvVar{{Name: "KEEP", Value: "2"}, {Name: "NEW", Value: "x"}},
			Mounts:     []*runtimeapi.Mount{{HostPath: "/srv", ContainerPath: "/data", Readonly: true}, {HostPath: "/srv/b", ContainerPath: "/b"}},
			Devices:    []*runtimeapi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", Permissions: "rwm"}},
			CDIDevices: []string{"vendor.com/gpu=0", "vendor.com/gpu=0"},
		}, func(c *runtimeapi.ContainerConfig) string {
			if string(c.Envs[0].Value) != "2" || len(c.Envs) != 3 || len(c.Mounts) != 3 || !c.Mounts[0].Readonly || c.Mounts[0].HostPath != "/srv" ||
				len(c.Devices) != 1 || len(c.CDIDevices) != 1 {
				return fmt.Sprintf("envs %v mounts %v devices %v cdi %v", c.Envs, c.Mounts, c.Devices, c.CDIDevices)
			}
			return ""
		}},
		{"resources: set fields replace, zero fields stay", &Adjustment{
			Resources:   &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 200, CpusetCpus: "0", HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 4 << 20}}},
			OOMScoreAdj: &oom,
		}, func(c *runtimeapi.ContainerConfig) string {
			r := c.Linux.Resources
			if r.MemoryLimitInBytes != 200 || r.CpuShares != 2 || r.CpusetCpus != "0" || r.OomScoreAdj != -10 || len(r.HugepageLimits) != 1 {
				return fmt.Sprintf("resources %v", r)
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := podConfig()
			tt.adj.ApplyContainer(cfg)
			if msg := tt.check(cfg); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestAdjustment_ApplySandbox(t *testing.T) {
	cfg := &runtimeapi.PodSandboxConfig{Annotations: map[string]string{"drop": "1", "keep": "1"}}
	(&Adjustment{Labels: map[string]string{"l": "v"}, Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}, Remove: Removal{Annotations: []string{"drop"}}}).ApplySandbox(cfg)
	if cfg.Labels["l"] != "v" || cfg.Linux.GetSysctls()["kernel.shm_rmid_forced"] != "1" || cfg.Annotations["drop"] != "" || cfg.Annotations["keep"] != "1" {
		t.Errorf("sandbox config %v", cfg)
	}
	var nilAdj *Adjustment
	nilAdj.ApplySandbox(cfg)
}
