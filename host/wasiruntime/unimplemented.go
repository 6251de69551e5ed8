package wasiruntime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// unimplemented is the error of every CRI call a WASI runtime cannot serve.
func unimplemented(call, why string) error {
	return status.Errorf(codes.Unimplemented, "%s is not supported by the embedded WASI runtime: %s", call, why)
}

// ExecSync is not supported: a WASI module has no way to run a second
// process inside it.
func (s *runtimeServer) ExecSync(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return nil, unimplemented("ExecSync", "a WASI module cannot run another command in its instance")
}

// Exec is not supported (see ExecSync).
func (s *runtimeServer) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, unimplemented("Exec", "a WASI module cannot run another command in its instance")
}

// Attach is not supported: there is no streaming server; logs are in the
// CRI log file.
func (s *runtimeServer) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, unimplemented("Attach", "there is no streaming server; read the container's log file")
}

// PortForward is not supported: pods share the node's network.
func (s *runtimeServer) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, unimplemented("PortForward", "pods use the node's network; connect to the node's address")
}

// UpdateContainerResources is not supported: the memory cap is fixed when the
// module is instantiated and there are no CPU limits.
func (s *runtimeServer) UpdateContainerResources(context.Context, *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return nil, unimplemented("UpdateContainerResources", "the memory limit is fixed at start and CPU limits are not enforced")
}

// CheckpointContainer is not supported.
func (s *runtimeServer) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return nil, unimplemented("CheckpointContainer", "no checkpoint/restore")
}

// GetContainerEvents is not supported, as in containerd 1.6: the agent's
// PLEG relists.
func (s *runtimeServer) GetContainerEvents(*runtimeapi.GetEventsRequest, runtimeapi.RuntimeService_GetContainerEventsServer) error {
	return unimplemented("GetContainerEvents", "no event stream; relist with ListContainers")
}

// RuntimeConfig is not supported, as in containerd 1.6: there are no cgroups.
func (s *runtimeServer) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return nil, unimplemented("RuntimeConfig", "no cgroups, so no cgroup driver")
}
