package wasiruntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeServer is the CRI RuntimeService of a Runtime. Calls that a WASI
// runtime cannot serve are in unimplemented.go.
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	r *Runtime
}

func newID() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Version implements the CRI call.
func (s *runtimeServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status implements the CRI call: the runtime and the (node's) network are
// always ready, and the one handler is the default (""), without recursive
// read-only mounts or user namespaces (a WASI module has neither).
func (s *runtimeServer) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}, RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}}}
	if req.GetVerbose() {
		resp.Info = map[string]string{"rootDir": s.r.cfg.RootDir, "podIP": s.r.podIP}
	}
	return resp, nil
}

// UpdateRuntimeConfig implements the CRI call; the pod CIDR means nothing to
// pods on the node's network, so it is accepted and ignored.
func (s *runtimeServer) UpdateRuntimeConfig(context.Context, *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RunPodSandbox implements the CRI call. The runtime has one handler, the
// default (""): a sandbox asked for another (a pod's RuntimeClass) is
// refused with InvalidArgument naming it, never run on the default.
func (s *runtimeServer) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.Name == "" || md.Namespace == "" || md.Uid == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must have metadata with name, namespace and uid")
	}
	if h := req.GetRuntimeHandler(); h != "" {
		return nil, status.Errorf(codes.InvalidArgument, "sandbox of pod %s/%s: runtime handler %q is not known: the embedded WASI runtime has only its default handler (\"\")", md.Namespace, md.Name, h)
	}
	r := s.r
	sb := &sandbox{
		ID:          newID(),
		Metadata:    md,
		State:       runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:   time.Now().UnixNano(),
		Labels:      cfg.GetLabels(),
		Annotations: cfg.GetAnnotations(),
		Hostname:    cfg.GetHostname(),
		LogDir:      cfg.GetLogDirectory(),
		Handler:     req.GetRuntimeHandler(),
	}
	name := sandboxName(md)
	r.mu.Lock()
	if id, ok := r.names[name]; ok {
		r.mu.Unlock()
		return nil, status.Errorf(codes.AlreadyExists, "sandbox name %q is reserved for %s", name, id)
	}
	r.names[name] = sb.ID
	r.sandboxes[sb.ID] = sb
	r.saveSandbox(sb)
	r.mu.Unlock()
	r.log.Info("sandbox ready", "sandbox", sb.ID, "pod", md.Namespace+"/"+md.Name, "uid", md.Uid, "attempt", md.Attempt)
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: sb.ID}, nil
}

// StopPodSandbox implements the CRI call: every container of the sandbox is
// stopped at once. Stopping an unknown sandbox is not an error.
func (s *runtimeServer) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r := s.r
	r.mu.Lock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	r.mu.Unlock()
	if !ok {
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	for _, c := range r.containersOf(sb.ID) {
		r.stopContainer(c, 0)
	}
	r.mu.Lock()
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.saveSandbox(sb)
		r.log.Info("sandbox stopped", "sandbox", sb.ID)
	}
	r.mu.Unlock()
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox implements the CRI call: the sandbox's containers are
// stopped and removed with it. Removing an unknown sandbox is not an error.
func (s *runtimeServer) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r := s.r
	r.mu.Lock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	r.mu.Unlock()
	if !ok {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	for _, c := range r.containersOf(sb.ID) {
		r.stopContainer(c, 0)
		if err := r.removeContainer(c); err != nil {
			return nil, status.Errorf(codes.Internal, "remove sandbox %s: %v", sb.ID, err)
		}
	}
	r.mu.Lock()
	delete(r.sandboxes, sb.ID)
	if r.names[sandboxName(sb.Metadata)] == sb.ID {
		delete(r.names, sandboxName(sb.Metadata))
	}
	err := r.state.remove("sandboxes", sb.ID)
	r.mu.Unlock()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "remove sandbox %s: %v", sb.ID, err)
	}
	r.log.Info("sandbox removed", "sandbox", sb.ID)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus implements the CRI call.
func (s *runtimeServer) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r := s.r
	r.mu.Lock()
	sb, ok := r.sandboxes[req.GetPodSandboxId()]
	var st *runtimeapi.PodSandboxStatus
	if ok {
		st = r.sandboxStatus(sb)
	}
	r.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q not found", req.GetPodSandboxId())
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: st, Timestamp: time.Now().UnixNano()}
	for _, c := range r.containersOf(sb.ID) {
		resp.ContainersStatuses = append(resp.ContainersStatuses, c.status())
	}
	if req.GetVerbose() {
		resp.Info = map[string]string{"runtime": RuntimeName}
	}
	return resp, nil
}

// sandboxStatus is called with r.mu held.
func (r *Runtime) sandboxStatus(sb *sandbox) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id:        sb.ID,
		Metadata:  sb.Metadata,
		State:     sb.State,
		CreatedAt: sb.CreatedAt,
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: r.podIP},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_NODE,
			Pid:     runtimeapi.NamespaceMode_CONTAINER,
			Ipc:     runtimeapi.NamespaceMode_POD,
		}}},
		Labels:         sb.Labels,
		Annotations:    sb.Annotations,
		RuntimeHandler: sb.Handler,
	}
}

// ListPodSandbox implements the CRI call with its filters (id or id prefix,
// state, label selector).
func (s *runtimeServer) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range r.sandboxes {
		if f != nil {
			if !matchID(sb.ID, f.Id) || (f.State != nil && f.State.State != sb.State) || !matchLabels(sb.Labels, f.LabelSelector) {
				continue
			}
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id:             sb.ID,
			Metadata:       sb.Metadata,
			State:          sb.State,
			CreatedAt:      sb.CreatedAt,
			Labels:         sb.Labels,
			Annotations:    sb.Annotations,
			RuntimeHandler: sb.Handler,
		})
	}
	sortByCreation(resp.Items, func(p *runtimeapi.PodSandbox) int64 { return p.CreatedAt })
	return resp, nil
}

// containersOf returns the sandbox's containers.
func (r *Runtime) containersOf(sandboxID string) []*container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*container
	for _, c := range r.containers {
		if c.SandboxID == sandboxID {
			out = append(out, c)
		}
	}
	return out
}
