package wasiruntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRuntime_Version(t *testing.T) {
	h := newHarness(t)
	v, err := h.rs.Version(context.Background(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != RuntimeName || v.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %+v", v)
	}
	st, err := h.rs.Status(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, c := range st.Status.Conditions {
		ready[c.Type] = c.Status
	}
	if !ready[runtimeapi.RuntimeReady] || !ready[runtimeapi.NetworkReady] {
		t.Errorf("Status conditions = %v, want runtime and network ready", st.Status.Conditions)
	}
	if hs := st.RuntimeHandlers; len(hs) != 1 || hs[0].Name != "" || hs[0].Features == nil ||
		hs[0].Features.RecursiveReadOnlyMounts || hs[0].Features.UserNamespaces {
		t.Errorf("Status runtime handlers = %v, want the default handler alone, without recursive read-only mounts or user namespaces", hs)
	}
}

func TestRuntime_StartContainer(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int32
		wantReason string
		wantLog    []string // "stream text" lines, in order
	}{
		{"completed", []string{"echo", "hello", "world"}, 0, "Completed", []string{"stdout hello world"}},
		{"exit-code", []string{"echo", "bye", ";", "exit", "3"}, 3, "Error", []string{"stdout bye"}},
		{"stderr", []string{"nosuchstep"}, 2, "Error", []string{`stderr testbox: nosuchstep: unknown step "nosuchstep"`}},
		{"hostname", []string{"env", "HOSTNAME"}, 0, "Completed", []string{"stdout HOSTNAME=pod"}},
	}
	h := newHarness(t)
	sb, sbCfg := h.sandbox(t, "pod", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			id := h.run(t, sb, sbCfg, tt.name, tt.args, nil)
			st := h.waitExit(t, id, 30*time.Second)
			if st.ExitCode != tt.wantCode || st.Reason != tt.wantReason {
				t.Errorf("exit = %d %q, want %d %q (message %q)", st.ExitCode, st.Reason, tt.wantCode, tt.wantReason, st.Message)
			}
			if st.StartedAt < before.UnixNano() || st.FinishedAt < st.StartedAt || st.CreatedAt > st.StartedAt {
				t.Errorf("times created %d started %d finished %d, test began %d", st.CreatedAt, st.StartedAt, st.FinishedAt, before.UnixNano())
			}
			want := filepath.Join(sbCfg.LogDirectory, tt.name, "0.log")
			if st.LogPath != want {
				t.Errorf("LogPath = %q, want %q", st.LogPath, want)
			}
			var got []string
			for _, l := range readLog(t, st.LogPath) {
				if l.partial {
					t.Errorf("unexpected partial line %q", l.text)
				}
				if l.time.Before(before.Add(-time.Second)) {
					t.Errorf("log time %v before the test", l.time)
				}
				got = append(got, l.stream+" "+l.text)
			}
			if strings.Join(got, "\n") != strings.Join(tt.wantLog, "\n") {
				t.Errorf("log = %q, want %q", got, tt.wantLog)
			}
		})
	}
}

func TestRuntime_Environment(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.sandbox(t, "env", nil)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "in"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := h.run(t, sb, sbCfg, "env", []string{
		"env", "FOO", "PWD", "HOSTNAME", ";",
		"cat", "/data/in", ";",
		"append", "/data/out", "from", "the", "module", ";",
		"append", "relative", "in", "the", "working", "dir", ";",
		"cat", "relative", ";",
		"cat", "/ro/in", ";",
		"append", "/ro/out", "x", ";",
	}, func(c *runtimeapi.ContainerConfig) {
		c.Envs = []*runtimeapi.KeyValue{{Key: "FOO", Value: []byte("bar")}, {Key: "HOSTNAME", Value: []byte("mine")}}
		c.WorkingDir = "/work"
		c.Mounts = []*runtimeapi.Mount{
			{ContainerPath: "/data", HostPath: data},
			{ContainerPath: "/ro", HostPath: data, Readonly: true},
			{ContainerPath: "/etc/hosts", HostPath: filepath.Join(data, "in")}, // a file: skipped
		}
	})
	st := h.waitExit(t, id, 30*time.Second)
	var got []string
	for _, l := range readLog(t, st.LogPath) {
		got = append(got, l.stream+" "+l.text)
	}
	want := []string{
		"stdout FOO=bar", "stdout PWD=/work", "stdout HOSTNAME=mine",
		"stdout from the host",
		"stdout in the working dir",
		"stdout from the host",
		// wazero's read-only mount refuses the open with ENOSYS.
		"stderr testbox: append /ro/out x: open /ro/out: Not implemented on wasip1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b, err := os.ReadFile(filepath.Join(data, "out"))
	if err != nil || string(b) != "from the module\n" {
		t.Errorf("host file = %q, %v", b, err)
	}
	if st.ExitCode != 2 {
		t.Errorf("exit code = %d, want 2 (the failed append)", st.ExitCode)
	}

	// Nothing of the host is visible but the mounts: not its /etc, and not
	// file mounts (WASI pre-opens only directories).
	for _, p := range []string{"/etc/passwd", "/etc/hosts"} {
		name := "host" + strings.ReplaceAll(p, "/", "-")
		id := h.run(t, sb, sbCfg, name, []string{"cat", p}, func(c *runtimeapi.ContainerConfig) {
			c.Mounts = []*runtimeapi.Mount{{ContainerPath: "/etc/hosts", HostPath: "/etc/hosts"}}
		})
		st := h.waitExit(t, id, 30*time.Second)
		lines := readLog(t, st.LogPath)
		if want := "testbox: cat " + p + ": open " + p + ": No such file or directory"; len(lines) != 1 || lines[0].text != want {
			t.Errorf("cat %s: log %v, want %q", p, lines, want)
		}
	}
}

func TestRuntime_StopContainer(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"spin", []string{"echo", "spinning", ";", "spin"}},
		{"sleep", []string{"echo", "sleeping", ";", "sleep", "1h"}},
		{"log", []string{"log", "10m", "tick"}},
	}
	h := newHarness(t)
	sb, sbCfg := h.sandbox(t, "stop", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := h.run(t, sb, sbCfg, tt.name, tt.args, nil)
			waitLog(t, filepath.Join(sbCfg.LogDirectory, tt.name, "0.log"), "stdout F", 30*time.Second)
			// The claim is that the grace period is not waited out: with an
			// hour of grace and a call bounded at five minutes, a runtime that
			// waited would fail the call, however loaded the machine.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := h.rs.StopContainer(ctx, id, 3600); err != nil {
				t.Fatalf("StopContainer with an hour of grace: %v", err)
			}
			resp, err := h.rs.ContainerStatus(context.Background(), id, false)
			if err != nil {
				t.Fatal(err)
			}
			st := resp.Status
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != exitKilled || st.Reason != "Error" {
				t.Errorf("after stop: %s exit %d %q, want EXITED %d Error", st.State, st.ExitCode, st.Reason, exitKilled)
			}
			// Stopping again is fine.
			if err := h.rs.StopContainer(ctx, id, 3600); err != nil {
				t.Errorf("second stop: %v", err)
			}
		})
	}
}

func TestRuntime_OOMKilled(t *testing.T) {
	tests := []struct {
		name       string
		limitMiB   int64
		allocMiB   string
		wantReason string
		wantCode   int32
	}{
		{"over", 32, "64", "OOMKilled", exitKilled},
		{"under", 128, "16", "Completed", 0},
		{"no-limit", 0, "16", "Completed", 0},
		{"initial-memory", 1, "1", "OOMKilled", exitKilled},
	}
	h := newHarness(t)
	sb, sbCfg := h.sandbox(t, "oom", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := h.run(t, sb, sbCfg, tt.name, []string{"oom", tt.allocMiB}, func(c *runtimeapi.ContainerConfig) {
				c.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: tt.limitMiB << 20}}
			})
			st := h.waitExit(t, id, 60*time.Second)
			if st.Reason != tt.wantReason || st.ExitCode != tt.wantCode {
				t.Errorf("exit %d %q (%s), want %d %q", st.ExitCode, st.Reason, st.Message, tt.wantCode, tt.wantReason)
			}
			if tt.limitMiB > 0 && st.GetResources().GetLinux().GetMemoryLimitInBytes() != tt.limitMiB<<20 {
				t.Errorf("status resources = %v", st.Resources)
			}
		})
	}
}

func TestRuntime_CreateContainer(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A valid module with no _start: a library, not a WASI command.
	empty := write("empty.wasm", []byte("\x00asm\x01\x00\x00\x00"))
	// (module (import "env" "f" (func)) (memory (export "memory") 1) (func (export "_start")))
	envImport := write("env.wasm", []byte("\x00asm\x01\x00\x00\x00"+
		"\x01\x04\x01\x60\x00\x00"+ // type: func () -> ()
		"\x02\x09\x01\x03env\x01f\x00\x00"+ // import env.f
		"\x03\x02\x01\x00"+ // one func
		"\x05\x03\x01\x00\x01"+ // memory min 1
		"\x07\x13\x02\x06memory\x02\x00\x06_start\x00\x01"+ // exports
		"\x0a\x04\x01\x02\x00\x0b")) // body
	for name, p := range map[string]string{"wasmlet.local/empty:1": empty, "wasmlet.local/env:1": envImport} {
		if _, err := h.rt.images.Import(name, p); err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
	}
	sb, sbCfg := h.sandbox(t, "bad", nil)
	tests := []struct {
		name, image, wantErr string
		wantCode             codes.Code
	}{
		{"no-start", "wasmlet.local/empty:1", "is not a WASI command module: it exports no _start function", codes.FailedPrecondition},
		{"env-import", "wasmlet.local/env:1", "imports env.f, which are not WASI preview 1", codes.FailedPrecondition},
		{"unknown", "wasmlet.local/nothere:1", `image "wasmlet.local/nothere:1" is not in the store`, codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.rs.CreateContainer(context.Background(), sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: tt.name},
				Image:    &runtimeapi.ImageSpec{Image: tt.image},
			}, sbCfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || status.Code(err) != tt.wantCode {
				t.Errorf("CreateContainer = %v, want %s containing %q", err, tt.wantCode, tt.wantErr)
			}
		})
	}
	// What a module cannot be given is refused, naming the field; zero huge
	// page limits (every container carries them) and CPU quota are not.
	linux := func(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerConfig {
		return &runtimeapi.LinuxContainerConfig{Resources: r}
	}
	for _, tt := range []struct {
		name    string
		cfg     *runtimeapi.ContainerConfig
		wantErr string
	}{
		{"device", &runtimeapi.ContainerConfig{Devices: []*runtimeapi.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse"}}}, "devices (/dev/fuse)"},
		{"cdi", &runtimeapi.ContainerConfig{CDIDevices: []*runtimeapi.CDIDevice{{Name: "vendor.com/gpu=0"}}}, "CDI_devices (vendor.com/gpu=0)"},
		{"cpuset", &runtimeapi.ContainerConfig{Linux: linux(&runtimeapi.LinuxContainerResources{CpusetCpus: "0"})}, "linux.resources.cpuset_cpus"},
		{"hugepages", &runtimeapi.ContainerConfig{Linux: linux(&runtimeapi.LinuxContainerResources{HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 2 << 20}}})}, "linux.resources.hugepage_limits (2MB"},
		{"quota and zero hugepages", &runtimeapi.ContainerConfig{Linux: linux(&runtimeapi.LinuxContainerResources{CpuQuota: 50000, CpuPeriod: 100000, CpuShares: 512,
			HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB"}}})}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Metadata, cfg.Image = &runtimeapi.ContainerMetadata{Name: "unsupported-" + tt.name}, &runtimeapi.ImageSpec{Image: testboxImage}
			_, err := h.rs.CreateContainer(context.Background(), sb, cfg, sbCfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CreateContainer = %v", err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CreateContainer = %v, want InvalidArgument naming %q", err, tt.wantErr)
			}
		})
	}
	// The same name twice in one sandbox and attempt is refused, as in containerd.
	h.container(t, sb, sbCfg, "twice", nil, nil)
	if _, err := h.rs.CreateContainer(context.Background(), sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "twice"}, Image: &runtimeapi.ImageSpec{Image: testboxImage},
	}, sbCfg); status.Code(err) != codes.AlreadyExists {
		t.Errorf("second create = %v, want AlreadyExists", err)
	}
}

func TestRuntime_PodSandbox(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb, sbCfg := h.sandbox(t, "web", map[string]string{"app": "web"})
	st, err := h.rs.PodSandboxStatus(ctx, sb, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || st.Status.Network.Ip != "10.1.2.3" ||
		st.Status.Linux.Namespaces.Options.Network != runtimeapi.NamespaceMode_NODE || st.Status.Labels["app"] != "web" {
		t.Errorf("PodSandboxStatus = %v", st.Status)
	}
	if _, err := h.rs.RunPodSandbox(ctx, sbCfg, ""); status.Code(err) != codes.AlreadyExists {
		t.Errorf("same sandbox again = %v, want AlreadyExists", err)
	}
	// A handler the runtime does not have (a pod's RuntimeClass) is
	// refused, naming the pod and the handler, and nothing is kept.
	other := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "gv", Namespace: "default", Uid: "uid-gv"}}
	_, err = h.rs.RunPodSandbox(ctx, other, "runsc")
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"runsc"`) || !strings.Contains(err.Error(), "default/gv") {
		t.Errorf("RunPodSandbox with handler runsc = %v, want InvalidArgument naming the pod and the handler", err)
	}
	if sbs, err := h.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{}}); err != nil || len(sbs) != 1 {
		t.Errorf("sandboxes after the refused one: %d, %v; want only web", len(sbs), err)
	}
	a := h.run(t, sb, sbCfg, "a", []string{"sleep", "1h"}, nil)
	b := h.run(t, sb, sbCfg, "b", []string{"spin"}, nil)
	// Bounded, so a sandbox stop that hung on the spinning module fails
	// the call instead of the test binary's timeout.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := h.rs.StopPodSandbox(stopCtx, sb); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		cs, err := h.rs.ContainerStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if cs.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Errorf("container %s is %s after StopPodSandbox", cs.Status.Metadata.Name, cs.Status.State)
		}
	}
	st, err = h.rs.PodSandboxStatus(ctx, sb, false)
	if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("after stop: %v %v", st, err)
	}
	if err := h.rs.StartContainer(ctx, h.container(t, sb, sbCfg, "late", nil, nil)); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("start in a stopped sandbox = %v, want FailedPrecondition", err)
	}
	if err := h.rs.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if cs, _ := h.rs.ListContainers(ctx, nil); len(cs) != 0 {
		t.Errorf("containers left after RemovePodSandbox: %v", cs)
	}
	if _, err := h.rs.PodSandboxStatus(ctx, sb, false); status.Code(err) != codes.NotFound {
		t.Errorf("status of removed sandbox = %v, want NotFound", err)
	}
	// Idempotent, as the CRI requires.
	if err := h.rs.StopPodSandbox(ctx, sb); err != nil {
		t.Errorf("stop removed sandbox: %v", err)
	}
	if err := h.rs.RemovePodSandbox(ctx, sb); err != nil {
		t.Errorf("remove removed sandbox: %v", err)
	}
	if err := h.rs.RemoveContainer(ctx, a); err != nil {
		t.Errorf("remove removed container: %v", err)
	}
	if _, err := os.Stat(h.rt.rootfs(a)); !os.IsNotExist(err) {
		t.Errorf("container scratch dir left: %v", err)
	}
}

func TestRuntime_List(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb1, cfg1 := h.sandbox(t, "one", map[string]string{"app": "one", "tier": "x"})
	sb2, cfg2 := h.sandbox(t, "two", map[string]string{"app": "two", "tier": "x"})
	run1 := h.run(t, sb1, cfg1, "run", []string{"sleep", "1h"}, nil)
	done1 := h.run(t, sb1, cfg1, "done", []string{"echo", "x"}, nil)
	created2 := h.container(t, sb2, cfg2, "created", nil, nil)
	h.waitExit(t, done1, 30*time.Second)
	if err := h.rs.StopPodSandbox(ctx, sb2); err != nil {
		t.Fatal(err)
	}

	ctrs := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all", nil, []string{run1, done1, created2}},
		{"id", &runtimeapi.ContainerFilter{Id: run1}, []string{run1}},
		{"id-prefix", &runtimeapi.ContainerFilter{Id: done1[:12]}, []string{done1}},
		{"running", &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, []string{run1}},
		{"exited", &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}}, []string{done1}},
		{"created", &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_CREATED}}, []string{created2}},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb2}, []string{created2}},
		{"label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "done"}}, []string{done1}},
		{"no-match", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"nope": "x"}}, nil},
	}
	for _, tt := range ctrs {
		t.Run("containers/"+tt.name, func(t *testing.T) {
			got, err := h.rs.ListContainers(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range got {
				ids = append(ids, c.Id)
			}
			if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
				t.Errorf("ListContainers = %v, want %v", ids, tt.want)
			}
		})
	}
	sbs := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"all", nil, []string{sb1, sb2}},
		{"id", &runtimeapi.PodSandboxFilter{Id: sb2}, []string{sb2}},
		{"ready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, []string{sb1}},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"tier": "x", "app": "two"}}, []string{sb2}},
	}
	for _, tt := range sbs {
		t.Run("sandboxes/"+tt.name, func(t *testing.T) {
			got, err := h.rs.ListPodSandbox(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.Id)
			}
			if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
				t.Errorf("ListPodSandbox = %v, want %v", ids, tt.want)
			}
		})
	}
}

func TestRuntime_Restart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb, sbCfg := h.sandbox(t, "keep", map[string]string{"app": "keep"})
	run := h.run(t, sb, sbCfg, "run", []string{"log", "1h", "tick"}, nil)
	waitLog(t, filepath.Join(sbCfg.LogDirectory, "run", "0.log"), "tick 1", 30*time.Second)
	if _, err := New(Config{RootDir: h.root}); err == nil || !strings.Contains(err.Error(), "in use by another runtime") {
		t.Errorf("a second runtime on the same root: %v, want an in-use error", err)
	}
	h.stop()
	h.start(t)
	sbs, err := h.rs.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 1 || sbs[0].Id != sb || sbs[0].Labels["app"] != "keep" {
		t.Fatalf("sandboxes after restart = %v, %v", sbs, err)
	}
	cs, err := h.rs.ContainerStatus(ctx, run, false)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED || cs.Status.ExitCode == 0 {
		t.Errorf("container after restart: %s exit %d", cs.Status.State, cs.Status.ExitCode)
	}
	// The agent's next attempt works in the same sandbox.
	next := h.run(t, sb, sbCfg, "run2", []string{"echo", "again"}, nil)
	if st := h.waitExit(t, next, 30*time.Second); st.Reason != "Completed" {
		t.Errorf("new container after restart: %v", st)
	}
}

func TestRuntime_Unimplemented(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sb, sbCfg := h.sandbox(t, "u", nil)
	id := h.run(t, sb, sbCfg, "u", []string{"sleep", "1h"}, nil)
	_, _, err := h.rs.ExecSync(ctx, id, []string{"ls"}, time.Second)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "embedded WASI runtime") {
		t.Errorf("ExecSync = %v, want Unimplemented naming the runtime", err)
	}
	if _, err := h.rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb}); status.Code(err) != codes.Unimplemented {
		t.Errorf("PortForward = %v, want Unimplemented", err)
	}
	if err := h.rs.ReopenContainerLog(ctx, id); err != nil {
		t.Errorf("ReopenContainerLog = %v", err)
	}
}

func TestRuntime_Trap(t *testing.T) {
	h := newHarness(t)
	// (module (memory (export "memory") 1) (func (export "_start") unreachable))
	p := filepath.Join(t.TempDir(), "trap.wasm")
	if err := os.WriteFile(p, []byte("\x00asm\x01\x00\x00\x00"+
		"\x01\x04\x01\x60\x00\x00"+
		"\x03\x02\x01\x00"+
		"\x05\x03\x01\x00\x01"+
		"\x07\x13\x02\x06memory\x02\x00\x06_start\x00\x00"+
		"\x0a\x05\x01\x03\x00\x00\x0b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.images.Import("wasmlet.local/trap:1", p); err != nil {
		t.Fatal(err)
	}
	sb, sbCfg := h.sandbox(t, "trap", nil)
	id := h.run(t, sb, sbCfg, "trap", nil, func(c *runtimeapi.ContainerConfig) {
		c.Image = &runtimeapi.ImageSpec{Image: "wasmlet.local/trap:1"}
		c.Command = nil
	})
	st := h.waitExit(t, id, 30*time.Second)
	if st.ExitCode != exitTrap || st.Reason != "Error" || !strings.Contains(st.Message, "unreachable") {
		t.Errorf("exit %d %q %q, want %d Error with the trap", st.ExitCode, st.Reason, st.Message, exitTrap)
	}
}

func TestRuntime_Metrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rt, err := New(Config{RootDir: t.TempDir(), CacheDir: testCache, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.images.Import(testboxImage, testboxWasm); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rs := &runtimeServer{r: rt}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "m", Namespace: "default", Uid: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"exit", "0"}, {"exit", "1"}} {
		c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: args[1]}, Image: &runtimeapi.ImageSpec{Image: testboxImage}, Args: args}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
		ctr, _ := rt.container(c.ContainerId)
		<-ctr.done
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			key := mf.GetName()
			for _, l := range m.Label {
				key += "/" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"wasmlet_wasiruntime_container_starts_total":          2,
		"wasmlet_wasiruntime_container_exits_total/Completed": 1,
		"wasmlet_wasiruntime_container_exits_total/Error":     1,
		"wasmlet_wasiruntime_containers_running":              0,
		"wasmlet_wasiruntime_compile_duration_seconds":        1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
