//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/harness"
)

var answerFlag = flag.String("answer-hook", "../../../host/internal/extension/testdata/answer.wasm",
	"the test-only hook plugin answering, per point, the JSON its manifest's config holds")

// TestHooks runs hook plugins that adjust containers beyond env, labels and
// annotations and checks each adjustment from inside the container, and
// the refusals: an undeclared adjustment, a conflict between two plugins,
// a validator. The plugin is the answer fixture: every pod of a case gets
// the adjustment its manifest's config holds, so the cases run one after
// another, each removing its plugins.
func TestHooks(t *testing.T) {
	cleanRuntime(t)
	t.Cleanup(func() { cleanRuntime(t) })
	wasm, err := os.ReadFile(*answerFlag)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, "hooks", flags.Endpoint)
	pd := &pluginDir{dir: filepath.Join(a.Dir, "plugins")}
	if err := os.MkdirAll(pd.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(a.Dir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "hello"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := *agentFlagsFlag
	*agentFlagsFlag = strings.TrimSpace(saved + " --plugin-dir " + pd.dir)
	a.start(t)
	*agentFlagsFlag = saved
	t.Cleanup(func() { a.Stop(t) })

	h := &hookCase{a: a, pd: pd, wasm: wasm, shared: shared}
	cases := []struct {
		name     string
		runtimes []string
		f        func(*testing.T, *hookCase)
	}{
		{"Adjustments", []string{"containerd"}, testHookAdjustments},
		{"MountAndMemoryCap", []string{"embedded"}, testHookEmbedded},
		{"CDI", []string{"containerd"}, func(t *testing.T, _ *hookCase) {
			t.Skip("containerd 1.6 (Debian 12's containerd 1.6.20, which the harness installs) has no CDI: no enable_cdi or cdi_spec_dirs; CDI devices are unit-tested (container, extension)")
		}},
		{"Hugepages", []string{"containerd"}, testHookHugepages},
		{"Undeclared", nil, testHookUndeclared},
		{"Conflict", nil, testHookConflict},
		{"Validator", nil, testHookValidator},
		{"PostStop", nil, testHookPostStop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.runtimes != nil && !contains(c.runtimes, flags.Runtime) {
				t.Skipf("not applicable to runtime %s", flags.Runtime)
			}
			a.diagnose(t)
			c.f(t, h)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hookCase is what the cases share: the agent, its plugin directory, the
// answer module and a host directory to mount.
type hookCase struct {
	a      *agent
	pd     *pluginDir
	wasm   []byte
	shared string
}

// install installs the answer module as hook plugin name with config
// (point → JSON) and the manifest's other fields from edit, waits until it
// serves, and uninstalls it when the case ends.
func (h *hookCase) install(t *testing.T, name string, config map[string]string, edit func(*abi.Manifest)) {
	t.Helper()
	m := abi.Manifest{Name: name, Version: "1.0.0", ABI: abi.V1, Kinds: []abi.Kind{abi.KindHook}, Config: config}
	if edit != nil {
		edit(&m)
	}
	h.pd.installModule(t, h.wasm, m)
	t.Cleanup(func() {
		// Gone from /plugins before the next case's pods, which it must
		// not adjust.
		h.pd.uninstall(t, name)
		harness.Eventually(t, time.Minute, "/plugins without "+name, func() (bool, string) {
			ps, err := h.a.plugins()
			if err != nil {
				return false, err.Error()
			}
			for _, s := range ps {
				if s.Name == name {
					return false, fmt.Sprintf("%+v", s)
				}
			}
			return true, ""
		})
	})
	waitPlugin(t, h.a, name, "loaded", func(s pluginStatus) bool { return s.State == "loaded" })
}

// run writes pod, and removes it (waiting until it is gone from the
// runtime) when the case ends.
func (h *hookCase) run(t *testing.T, pod *v1.Pod) {
	t.Helper()
	h.a.Write(t, pod.Name+".yaml", pod)
	t.Cleanup(func() {
		h.a.Remove(t, pod.Name+".yaml")
		h.a.waitGone(t, pod.Name, 2*time.Minute)
		waitRuntimeGone(t, pod.Name, 2*time.Minute)
	})
}

// waiting waits until pod's container c waits with reason, its message
// holding every one of want.
func (h *hookCase) waiting(t *testing.T, pod, c, reason string, want ...string) {
	t.Helper()
	h.a.waitPod(t, pod, 2*time.Minute, c+" waiting with "+reason+" "+strings.Join(want, ", "), func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != c || cs.State.Waiting == nil || cs.State.Waiting.Reason != reason {
				continue
			}
			for _, w := range want {
				if !strings.Contains(cs.State.Waiting.Message, w) {
					return false
				}
			}
			return true
		}
		return false
	})
}

// Every new adjustment seen from inside the container on containerd: the
// mount (read-only), the device node, the memory limit and CPU quota in
// the cgroup (v1 here), the OOM score, the sandbox sysctl and a removed
// env variable.
func testHookAdjustments(t *testing.T, h *hookCase) {
	h.install(t, "adjuster", map[string]string{
		"PreSandbox": `{"adjustment":{"sysctls":{"kernel.shm_rmid_forced":"1"}}}`,
		"PreCreate": fmt.Sprintf(`{"adjustment":{"mounts":[{"hostPath":%q,"containerPath":"/hooked","readOnly":true}],`+
			`"devices":[{"hostPath":"/dev/fuse","permissions":"rw"}],`+
			`"resources":{"memoryLimitBytes":134217728,"cpuQuota":20000,"cpuPeriod":100000},"oomScoreAdj":321,`+
			`"remove":{"env":["REMOVE_ME"]}}}`, h.shared),
	}, func(m *abi.Manifest) {
		m.Points = []abi.HookPoint{abi.HookPreSandbox, abi.HookPreCreate}
		m.Permissions.Adjust = []abi.AdjustField{abi.AdjustMounts, abi.AdjustDevices, abi.AdjustResources, abi.AdjustOOMScoreAdj, abi.AdjustSysctls, abi.AdjustRemove}
		m.Permissions.HostPaths = []string{h.shared, "/dev/fuse"}
	})
	probe := box("probe", "env", "REMOVE_ME", "KEEP", ";", "cat", "/hooked/hello", ";", "cat", "/proc/self/oom_score_adj", ";",
		"cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes", ";", "cat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", ";",
		"cat", "/proc/sys/kernel/shm_rmid_forced", ";", "echo", "probe-done", ";", "sleep", "inf")
	probe.Env = []v1.EnvVar{{Name: "REMOVE_ME", Value: "from-the-spec"}, {Name: "KEEP", Value: "kept"}}
	pod := newPod("hooked", v1.RestartPolicyNever, probe,
		box("device", "cat", "/dev/fuse"),
		box("readonly", "append", "/hooked/x", "written"))
	h.run(t, pod)
	p := h.a.waitPod(t, "hooked", 2*time.Minute, "probe running", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "probe" && cs.State.Running != nil {
				return true
			}
		}
		return false
	})
	log := readFileEventually(t, h.a.containerLog(p, "probe", 0), "probe-done", time.Minute)
	for _, want := range []string{"F REMOVE_ME=\n", "F KEEP=kept\n", "F from-the-host\n", "F 321\n", "F 134217728\n", "F 20000\n", "F 1\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("probe's log lacks %q:\n%s", want, log)
		}
	}
	// The device node is there (reading an unopened FUSE device fails,
	// but not with "no such file").
	dev := readFileEventually(t, h.a.containerLog(p, "device", 0), "/dev/fuse", time.Minute)
	if strings.Contains(dev, "no such file or directory") {
		t.Errorf("/dev/fuse is missing in the container:\n%s", dev)
	}
	readFileEventually(t, h.a.containerLog(p, "readonly", 0), "read-only file system", time.Minute)
}

// On the embedded runtime: the mount is a pre-opened directory, read-only
// to the module, and the memory limit the module's memory cap (past it:
// OOMKilled).
func testHookEmbedded(t *testing.T, h *hookCase) {
	h.install(t, "adjuster", map[string]string{
		"PreCreate": fmt.Sprintf(`{"adjustment":{"mounts":[{"hostPath":%q,"containerPath":"/hooked","readOnly":true}],`+
			`"resources":{"memoryLimitBytes":33554432}}}`, h.shared),
	}, func(m *abi.Manifest) {
		m.Points = []abi.HookPoint{abi.HookPreCreate}
		m.Permissions.Adjust = []abi.AdjustField{abi.AdjustMounts, abi.AdjustResources}
		m.Permissions.HostPaths = []string{h.shared}
	})
	pod := newPod("hooked", v1.RestartPolicyNever,
		box("probe", "cat", "/hooked/hello", ";", "sleep", "inf"),
		box("readonly", "append", "/hooked/x", "written"),
		box("oom", "oom", "64"))
	h.run(t, pod)
	p := h.a.waitPod(t, "hooked", 2*time.Minute, "oom OOMKilled", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "oom" && cs.State.Terminated != nil {
				return cs.State.Terminated.Reason == "OOMKilled"
			}
		}
		return false
	})
	readFileEventually(t, h.a.containerLog(p, "probe", 0), "from-the-host", time.Minute)
	ro := readFileEventually(t, h.a.containerLog(p, "readonly", 0), "testbox: append", time.Minute)
	if _, err := os.Stat(filepath.Join(h.shared, "x")); err == nil {
		t.Errorf("the module wrote to its read-only mount:\n%s", ro)
	}
}

// A hugepage limit needs the hugetlb cgroup controller.
func testHookHugepages(t *testing.T, h *hookCase) {
	if _, err := os.Stat("/sys/fs/cgroup/hugetlb"); err != nil {
		t.Skipf("no hugetlb cgroup controller mounted at /sys/fs/cgroup/hugetlb (%v)", err)
	}
	h.install(t, "hugepages", map[string]string{
		"PreCreate": `{"adjustment":{"resources":{"hugepageLimits":[{"pageSize":"2MB","limit":4194304}]}}}`,
	}, func(m *abi.Manifest) { m.Permissions.Adjust = []abi.AdjustField{abi.AdjustResources} })
	pod := newPod("huge", v1.RestartPolicyNever, box("probe", "cat", "/sys/fs/cgroup/hugetlb/hugetlb.2MB.limit_in_bytes", ";", "sleep", "inf"))
	h.run(t, pod)
	p := h.a.waitRunning(t, "huge", 2*time.Minute)
	readFileEventually(t, h.a.containerLog(p, "probe", 0), "F 4194304\n", time.Minute)
}

// A mount the manifest does not declare is refused naming the plugin, the
// pod and the field; the container waits.
func testHookUndeclared(t *testing.T, h *hookCase) {
	h.install(t, "undeclared", map[string]string{
		"PreCreate": fmt.Sprintf(`{"adjustment":{"mounts":[{"hostPath":%q,"containerPath":"/hooked"}]}}`, h.shared),
	}, nil)
	h.run(t, newPod("undeclared", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	h.waiting(t, "undeclared", "main", "PreCreateHookError", "hook plugin undeclared", "pod default/undeclared", `adjustment field "mounts" is not declared`)
}

// Two plugins setting one env variable to different values are refused
// naming both, although both fail open (Ignore).
func testHookConflict(t *testing.T, h *hookCase) {
	for i, v := range []string{"one", "two"} {
		h.install(t, "conflict-"+v, map[string]string{"PreCreate": `{"adjustment":{"env":[{"name":"X","value":"` + v + `"}]}}`},
			func(m *abi.Manifest) { m.Order, m.FailurePolicy = i, abi.FailurePolicyIgnore })
	}
	h.run(t, newPod("conflict", v1.RestartPolicyAlways, box("main", "sleep", "inf")))
	h.waiting(t, "conflict", "main", "PreCreateHookError", "hook plugins conflict-one and conflict-two conflict", "env:X")
}

// A validator refuses a container mounting a host path; the container
// waits with CreateContainerConfigError and the plugin's message.
func testHookValidator(t *testing.T, h *hookCase) {
	h.install(t, "validator", map[string]string{"Validate": `{"refuse":"host path /etc is not on the allow-list"}`},
		func(m *abi.Manifest) { m.Points = []abi.HookPoint{abi.HookValidate} })
	pod := newPod("validated", v1.RestartPolicyAlways, box("main", "sleep", "inf"))
	pod.Spec.Volumes = []v1.Volume{{Name: "etc", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc"}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "etc", MountPath: "/host-etc", ReadOnly: true}}
	h.run(t, pod)
	h.waiting(t, "validated", "main", "CreateContainerConfigError", "hook plugin validator refused the container: host path /etc is not on the allow-list")
}

// PostStop sees the exit code of a container that exited on its own.
func testHookPostStop(t *testing.T, h *hookCase) {
	h.install(t, "poststop", map[string]string{"log": "yes"}, func(m *abi.Manifest) { m.Points = []abi.HookPoint{abi.HookPostStop} })
	h.run(t, newPod("exits", v1.RestartPolicyNever, box("main", "exit", "3")))
	harness.Eventually(t, time.Minute, "the PostStop request with exit code 3 in the agent's log", func() (bool, string) {
		// The request is the log line's message: raw in the text log,
		// escaped in the JSON one.
		return (h.a.LogContains(`"point":"PostStop"`) && h.a.LogContains(`"exitCode":3`)) ||
			(h.a.LogContains(`\"point\":\"PostStop\"`) && h.a.LogContains(`\"exitCode\":3`)), ""
	})
}
