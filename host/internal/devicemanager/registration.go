package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wasmlet/wasmlet/host/internal/admission"
)

// dialTimeout bounds the connection to a registering plugin, as the
// kubelet's.
const dialTimeout = 10 * time.Second

// registration is the Registration service.
type registration struct {
	pluginapi.UnsafeRegistrationServer
	m   *Manager
	ctx context.Context // the manager's: a plugin's stream lives as long
}

// Register checks the request as the kubelet does (API version, an
// extended resource name), connects to the plugin's endpoint, asks its
// options, and follows its ListAndWatch stream. An error is the plugin's
// answer: registration failed and the resource is not used.
func (r *registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		return &pluginapi.Empty{}, fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
	}
	if !admission.IsExtendedResourceName(v1.ResourceName(req.ResourceName)) {
		return &pluginapi.Empty{}, fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
	}
	if err := r.m.connect(r.ctx, ctx, req); err != nil {
		r.m.log.Error("device plugin registration failed", "resource", req.ResourceName, "endpoint", req.Endpoint, "error", err)
		return &pluginapi.Empty{}, err
	}
	return &pluginapi.Empty{}, nil
}

// connect dials a registering plugin, asks its options and, when both
// succeed, makes it the resource's endpoint and starts following its
// devices with run.
func (m *Manager) connect(life, ctx context.Context, req *pluginapi.RegisterRequest) error {
	socket := filepath.Join(m.dir, req.Endpoint)
	conn, err := dial(ctx, socket)
	if err != nil {
		return fmt.Errorf("failed to dial device plugin: resource %s, endpoint %s: %w", req.ResourceName, socket, err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("failed to get device plugin options: resource %s, endpoint %s: %w", req.ResourceName, socket, err)
	}
	e := &endpoint{resource: req.ResourceName, socket: socket, conn: conn, client: client, options: opts}
	m.mu.Lock()
	old := m.endpoints[req.ResourceName]
	m.endpoints[req.ResourceName] = e
	delete(m.removed, req.ResourceName)
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	m.log.Info("device plugin registered", "resource", req.ResourceName, "endpoint", socket,
		"preferred_allocation", opts.GetGetPreferredAllocationAvailable(), "pre_start", opts.GetPreStartRequired())
	go m.run(life, e)
	return nil
}

// run follows a plugin's ListAndWatch stream until it ends. It is not
// retried, as the kubelet does not: a plugin that recovers registers again.
func (m *Manager) run(ctx context.Context, e *endpoint) {
	stream, err := e.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		m.stopped(e, err)
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			m.stopped(e, err)
			return
		}
		m.update(e, resp.Devices)
	}
}

// dial connects to a plugin's unix socket, waiting until the connection is
// ready or dialTimeout passes.
func dial(ctx context.Context, socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return conn, nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			conn.Close()
			return nil, errors.Join(ctx.Err(), fmt.Errorf("connection %s", s))
		}
	}
}
