package wasiruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

// CreateContainer implements the CRI call. The image must be in the store
// and be a WASI command module: anything else fails here, naming the image.
func (s *runtimeServer) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	r := s.r
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must have metadata with a name")
	}
	r.mu.Lock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	r.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "create container %s: pod sandbox %q not found", md.Name, req.GetPodSandboxId())
	}
	ref := cfg.GetImage().GetImage()
	img, err := r.images.Resolve(ref)
	if err != nil {
		if errors.Is(err, image.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "create container %s: image %q is not in the store: pull or import it first", md.Name, ref)
		}
		return nil, status.Errorf(codes.Internal, "create container %s: %v", md.Name, err)
	}
	display := cfg.GetImage().GetUserSpecifiedImage()
	if display == "" {
		display = ref
	}
	if strings.HasPrefix(display, "sha256:") && len(img.Names) > 0 {
		display = img.Names[0]
	}
	if _, err := r.modules.get(ctx, img, display); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "create container %s: %v", md.Name, err)
	}
	if err := checkUnsupported(cfg); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "create container %s: %v", md.Name, err)
	}
	mounts, err := checkMounts(cfg.GetMounts())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "create container %s: %v", md.Name, err)
	}
	c := &container{
		ID:          newID(),
		SandboxID:   sb.ID,
		Metadata:    md,
		Image:       display,
		ImageRef:    img.ID,
		Labels:      cfg.GetLabels(),
		Annotations: cfg.GetAnnotations(),
		Argv:        argv(cfg.GetCommand(), cfg.GetArgs(), img, display),
		WorkingDir:  cfg.GetWorkingDir(),
		Mounts:      mounts,
		MemoryLimit: cfg.GetLinux().GetResources().GetMemoryLimitInBytes(),
		CreatedAt:   time.Now().UnixNano(),
		State:       runtimeapi.ContainerState_CONTAINER_CREATED,
	}
	for _, kv := range cfg.GetEnvs() {
		c.Env = append(c.Env, kv.Key+"="+string(kv.Value))
	}
	if sb.LogDir != "" && cfg.GetLogPath() != "" {
		c.LogPath = filepath.Join(sb.LogDir, cfg.GetLogPath())
	}
	rootfs := r.rootfs(c.ID)
	if err := os.MkdirAll(filepath.Join(rootfs, filepath.FromSlash(path.Clean("/"+c.WorkingDir))), 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "create container %s: %v", md.Name, err)
	}
	name := containerName(sb.ID, md)
	r.mu.Lock()
	if id, ok := r.names[name]; ok {
		r.mu.Unlock()
		os.RemoveAll(filepath.Dir(rootfs))
		return nil, status.Errorf(codes.AlreadyExists, "container name %q is reserved for %s", name, id)
	}
	r.names[name] = c.ID
	r.containers[c.ID] = c
	r.mu.Unlock()
	c.mu.Lock()
	r.saveContainer(c)
	c.mu.Unlock()
	if res := cfg.GetLinux().GetResources(); res.GetCpuQuota() > 0 {
		// Every container with a CPU limit carries a quota (and shares):
		// accepted, not enforced.
		r.log.Debug("CPU shares and quota are not enforced by the WASI runtime", "container", c.ID, "name", md.Name, "sandbox", sb.ID)
	}
	r.log.Debug("container created", "container", c.ID, "name", md.Name, "sandbox", sb.ID, "image", display)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.ID}, nil
}

// argv maps an image and a container's command and args to the module's
// argv: the module is the entrypoint; argv[0] is command[0] when a command is
// given, else the image config's entrypoint, else the image name; args (or
// the image config's cmd when neither command nor args are given) follow.
func argv(command, args []string, img image.Image, name string) []string {
	switch {
	case len(command) > 0:
		return append(append([]string{}, command...), args...)
	case len(img.Entrypoint) > 0:
		if len(args) == 0 {
			args = img.Cmd
		}
		return append(append([]string{}, img.Entrypoint...), args...)
	case len(args) == 0 && len(img.Cmd) > 0:
		return append([]string{}, img.Cmd...)
	}
	return append([]string{name}, args...)
}

// checkUnsupported refuses what a WASI module cannot be given, naming the
// config field: devices, CDI devices, a cpuset, huge page limits (the
// zero limits every container carries are fine). The memory limit becomes
// the module's memory cap and mounts pre-opened directories; CPU shares and
// quota are accepted and not enforced.
func checkUnsupported(cfg *runtimeapi.ContainerConfig) error {
	if len(cfg.GetDevices()) > 0 {
		return fmt.Errorf("devices (%s): a WASI module has no device nodes", cfg.GetDevices()[0].GetHostPath())
	}
	if len(cfg.GetCDIDevices()) > 0 {
		return fmt.Errorf("CDI_devices (%s): a WASI module has no device nodes", cfg.GetCDIDevices()[0].GetName())
	}
	res := cfg.GetLinux().GetResources()
	if res.GetCpusetCpus() != "" || res.GetCpusetMems() != "" {
		return fmt.Errorf("linux.resources.cpuset_cpus/cpuset_mems (%q/%q): the WASI runtime cannot pin a module to CPUs or memory nodes", res.GetCpusetCpus(), res.GetCpusetMems())
	}
	for _, h := range res.GetHugepageLimits() {
		if h.GetLimit() > 0 {
			return fmt.Errorf("linux.resources.hugepage_limits (%s: %d): a WASI module's memory has no huge pages", h.GetPageSize(), h.GetLimit())
		}
	}
	return nil
}

// checkMounts keeps the directory mounts (WASI pre-opens only directories);
// file mounts such as /etc/hosts are dropped, a missing host path is an error.
func checkMounts(ms []*runtimeapi.Mount) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for _, m := range ms {
		if m.ContainerPath == "" || !path.IsAbs(m.ContainerPath) {
			return nil, fmt.Errorf("mount %q: container path must be absolute", m.ContainerPath)
		}
		fi, err := os.Stat(m.HostPath)
		if err != nil {
			return nil, fmt.Errorf("mount %s: host path: %w", m.ContainerPath, err)
		}
		if fi.IsDir() {
			out = append(out, m)
		}
	}
	return out, nil
}

func (r *Runtime) rootfs(id string) string {
	return filepath.Join(r.cfg.RootDir, "containers", id, "rootfs")
}

func (r *Runtime) container(id string) (*container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok {
		return c, nil
	}
	return nil, status.Errorf(codes.NotFound, "container %q not found", id)
}

// StartContainer implements the CRI call: the module runs in its own
// goroutine until it exits or is stopped.
func (s *runtimeServer) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := s.r.container(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if err := s.r.start(ctx, c); err != nil {
		return nil, err
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer implements the CRI call. WASI has no signals: the module is
// cancelled at once and, if still running after the timeout, closed outright.
func (s *runtimeServer) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := s.r.container(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if err := s.r.stopContainer(c, time.Duration(req.GetTimeout())*time.Second); err != nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "stop container %s: %v", c.ID, err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer implements the CRI call; a running container is stopped
// first. Removing an unknown container is not an error.
func (s *runtimeServer) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r := s.r
	c, err := r.container(req.GetContainerId())
	if err != nil {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err := r.stopContainer(c, 0); err != nil {
		return nil, status.Errorf(codes.Internal, "remove container %s: %v", c.ID, err)
	}
	if err := r.removeContainer(c); err != nil {
		return nil, status.Errorf(codes.Internal, "remove container %s: %v", c.ID, err)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// removeContainer forgets a stopped container and deletes its scratch root;
// its log file stays (the kubelet removes logs itself).
func (r *Runtime) removeContainer(c *container) error {
	r.mu.Lock()
	delete(r.containers, c.ID)
	if r.names[containerName(c.SandboxID, c.Metadata)] == c.ID {
		delete(r.names, containerName(c.SandboxID, c.Metadata))
	}
	r.mu.Unlock()
	if err := os.RemoveAll(filepath.Dir(r.rootfs(c.ID))); err != nil {
		return err
	}
	r.log.Debug("container removed", "container", c.ID)
	return r.state.remove("containers", c.ID)
}

// ListContainers implements the CRI call with its filters (id or id prefix,
// state, sandbox id or prefix, label selector).
func (s *runtimeServer) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	r := s.r
	cs := r.containerList()
	resp := &runtimeapi.ListContainersResponse{}
	for _, c := range cs {
		c.mu.Lock()
		st := c.State
		c.mu.Unlock()
		if f != nil {
			if !matchID(c.ID, f.Id) || !matchID(c.SandboxID, f.PodSandboxId) ||
				(f.State != nil && f.State.State != st) || !matchLabels(c.Labels, f.LabelSelector) {
				continue
			}
		}
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id:           c.ID,
			PodSandboxId: c.SandboxID,
			Metadata:     c.Metadata,
			Image:        &runtimeapi.ImageSpec{Image: c.Image},
			ImageRef:     c.ImageRef,
			ImageId:      c.ImageRef,
			State:        st,
			CreatedAt:    c.CreatedAt,
			Labels:       c.Labels,
			Annotations:  c.Annotations,
		})
	}
	sortByCreation(resp.Containers, func(c *runtimeapi.Container) int64 { return c.CreatedAt })
	return resp, nil
}

// ContainerStatus implements the CRI call.
func (s *runtimeServer) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	c, err := s.r.container(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ContainerStatusResponse{Status: c.status()}
	if req.GetVerbose() {
		resp.Info = map[string]string{"argv": strings.Join(c.Argv, " "), "rootfs": s.r.rootfs(c.ID)}
	}
	return resp, nil
}

func (c *container) status() *runtimeapi.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &runtimeapi.ContainerStatus{
		Id:          c.ID,
		Metadata:    c.Metadata,
		State:       c.State,
		CreatedAt:   c.CreatedAt,
		StartedAt:   c.StartedAt,
		FinishedAt:  c.FinishedAt,
		ExitCode:    c.ExitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.Image},
		ImageRef:    c.ImageRef,
		ImageId:     c.ImageRef,
		Reason:      c.Reason,
		Message:     c.Message,
		Labels:      c.Labels,
		Annotations: c.Annotations,
		Mounts:      c.Mounts,
		LogPath:     c.LogPath,
	}
	if c.MemoryLimit > 0 {
		st.Resources = &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: c.MemoryLimit}}
	}
	return st
}

// ReopenContainerLog implements the CRI call (after the kubelet rotated the
// log file).
func (s *runtimeServer) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.r.container(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	lf, running := c.logs, c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	c.mu.Unlock()
	if !running || lf == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running or has no log", c.ID)
	}
	if err := lf.reopen(); err != nil {
		return nil, status.Errorf(codes.Internal, "reopen log of container %s: %v", c.ID, err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
