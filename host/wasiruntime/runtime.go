// Package wasiruntime is wasmlet's embedded container runtime: a CRI v1
// RuntimeService and ImageService on a unix socket that runs WASI command
// modules on wazero instead of Linux containers, in the manner of Krustlet
// and runwasi. The agent talks to it exactly as it talks to containerd.
//
// Embedding it (what `wasmlet run` does when no runtime endpoint is given):
//
//	rt, err := wasiruntime.New(wasiruntime.Config{RootDir: filepath.Join(agentRoot, "runtime"), Logger: log})
//	l, err := wasiruntime.Listen(rt.Endpoint())   // the socket exists once this returns
//	go rt.Serve(ctx, l)                            // returns when ctx is done
//	defer rt.Close()                               // stops every workload
//
// then dial rt.Endpoint() with the ordinary CRI client. `wasmlet runtime`
// runs the same server as its own process, so an agent restart keeps the
// workloads running.
//
// Images are WASI modules in the store of package image under
// <RootDir>/images; sandboxes and containers are kept in memory and in
// <RootDir>/state, so a restarted runtime still knows them (containers that
// were running are reported exited: their instances died with the process).
package wasiruntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/host/internal/meter"
	"github.com/wasmlet/wasmlet/host/internal/pluginoci"
	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

// Name and version reported by the CRI Version call.
const (
	RuntimeName    = "wasmlet-wasi"
	RuntimeVersion = "0.1.0"
)

// Config configures a Runtime. Only RootDir is required.
type Config struct {
	// RootDir holds the image store, the compilation cache, the sandbox and
	// container state, each container's scratch root directory and, by
	// default, the socket (<RootDir>/cri.sock).
	RootDir string
	// CacheDir is the wazero compilation cache; empty means <RootDir>/cache.
	CacheDir string
	// PodIP is the IP reported for every sandbox (pods share the node's
	// network); empty means the first non-loopback IPv4 of the node.
	PodIP string
	// RegistryCA is a PEM file of certificate authorities trusted for
	// image registries besides the system's, for a registry with a
	// private CA.
	RegistryCA string
	// Logger receives structured logs; nil discards them.
	Logger hclog.Logger
	// Registerer receives the runtime's metrics (wasmlet_wasiruntime_*);
	// nil means none are registered.
	Registerer prometheus.Registerer
}

// Runtime is the embedded WASI runtime. Create it with New.
type Runtime struct {
	lock   *os.File // flock on <RootDir>/lock: one runtime per root
	cfg    Config
	log    hclog.Logger
	images *image.Store
	// registry reads images from registries (the credentials are each
	// pull's own).
	registry *pluginoci.Client
	podIP    string
	state    *stateDir

	wz      *engines
	modules *moduleCache
	metrics *metrics

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	names      map[string]string // reserved sandbox/container name → id

	closeOnce sync.Once
}

// New opens (or creates) the runtime's root directory and loads the state of
// a previous run.
func New(cfg Config) (*Runtime, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("wasiruntime: Config.RootDir is required")
	}
	root, err := filepath.Abs(cfg.RootDir)
	if err != nil {
		return nil, err
	}
	cfg.RootDir = root
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(root, "cache")
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.Named("wasiruntime")
	for _, d := range []string{root, cfg.CacheDir, filepath.Join(root, "containers")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("wasiruntime: %w", err)
		}
	}
	lock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	images, err := OpenImages(root)
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	st, err := openStateDir(filepath.Join(root, "state"))
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: metrics: %w", err)
	}
	registry, err := pluginoci.New(pluginoci.Config{CAFile: cfg.RegistryCA, UserAgent: "wasmlet-wasiruntime"})
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	ctx := context.Background()
	wz, err := newEngines(ctx, cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	podIP := cfg.PodIP
	if podIP == "" {
		podIP = nodeIP()
	}
	r := &Runtime{
		lock:       lock,
		cfg:        cfg,
		log:        log,
		images:     images,
		registry:   registry,
		podIP:      podIP,
		state:      st,
		wz:         wz,
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		names:      map[string]string{},
	}
	r.metrics = m
	r.modules = newModuleCache(wz, log, m.compile)
	if err := r.load(); err != nil {
		wz.close(ctx)
		return nil, fmt.Errorf("wasiruntime: state %s: %w", st.dir, err)
	}
	ok = true
	return r, nil
}

// engines are the wazero runtimes containers run in, sharing one compilation
// cache. A module is metered (package meter) when the rewriter handles it,
// and runs in metered: the meter's tick ends it when its container is
// stopped. A module the rewriter refuses runs in closing, with
// WithCloseOnContextDone, which stops it too at a higher cost (see
// RATIONALE.md, "The embedded runtime").
type engines struct {
	metered wazero.Runtime
	closing wazero.Runtime
	cache   wazero.CompilationCache
	meter   meter.Config
}

// newEngines creates both runtimes, with WASI, the compilation cache in
// cacheDir and the metered modules kept there too.
func newEngines(ctx context.Context, cacheDir string) (*engines, error) {
	cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: compilation cache %s: %w", cacheDir, err)
	}
	e := &engines{cache: cache, meter: meter.Config{CacheDir: cacheDir}}
	for _, closeOnDone := range []bool{false, true} {
		wr := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
			WithCompilationCache(cache).
			WithCloseOnContextDone(closeOnDone))
		if closeOnDone {
			e.closing = wr
		} else {
			e.metered = wr
		}
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
			e.close(ctx)
			return nil, fmt.Errorf("wasiruntime: WASI: %w", err)
		}
		if !closeOnDone {
			if err := e.meter.Instantiate(ctx, wr); err != nil {
				e.close(ctx)
				return nil, fmt.Errorf("wasiruntime: meter: %w", err)
			}
		}
	}
	return e, nil
}

// close releases the runtimes and the compilation cache.
func (e *engines) close(ctx context.Context) error {
	var err error
	for _, wr := range []wazero.Runtime{e.metered, e.closing} {
		if wr != nil {
			if cerr := wr.Close(ctx); err == nil {
				err = cerr
			}
		}
	}
	if cerr := e.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// Precompile compiles an image of the runtime rooted at rootDir into its
// compilation cache (<rootDir>/cache) and checks that it is a WASI command
// module, so that the first container of the image starts without the
// compile. `wasmlet runtime import` calls it.
func Precompile(ctx context.Context, rootDir, ref string) error {
	images, err := OpenImages(rootDir)
	if err != nil {
		return err
	}
	img, err := images.Resolve(ref)
	if err != nil {
		return err
	}
	wz, err := newEngines(ctx, filepath.Join(rootDir, "cache"))
	if err != nil {
		return err
	}
	defer wz.close(ctx)
	_, err = newModuleCache(wz, hclog.NewNullLogger(), nil).get(ctx, img, ref)
	return err
}

// Endpoint returns the default CRI endpoint: unix://<RootDir>/cri.sock.
func (r *Runtime) Endpoint() string {
	return "unix://" + filepath.Join(r.cfg.RootDir, "cri.sock")
}

// OpenImages opens the image store of the runtime rooted at rootDir, for
// importing images with or without a running runtime (`wasmlet runtime
// import`); a running runtime sees them at once.
func OpenImages(rootDir string) (*image.Store, error) {
	return image.Open(filepath.Join(rootDir, "images"))
}

// Listen opens a unix socket listener for an endpoint "unix:///path" (or a
// bare path), replacing a stale socket file.
func Listen(endpoint string) (net.Listener, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if path == "" || strings.Contains(path, "://") {
		return nil, fmt.Errorf("wasiruntime: endpoint %q: want unix:///path", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("wasiruntime: %s: another server is listening", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	return l, nil
}

// Serve serves the CRI RuntimeService and ImageService on l until ctx is
// done. It does not stop the workloads: call Close for that.
func (r *Runtime) Serve(ctx context.Context, l net.Listener) error {
	s := grpc.NewServer(grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20))
	runtimeapi.RegisterRuntimeServiceServer(s, &runtimeServer{r: r})
	runtimeapi.RegisterImageServiceServer(s, &imageServer{r: r})
	stop := context.AfterFunc(ctx, s.Stop)
	defer stop()
	r.log.Info("serving CRI", "address", l.Addr().String(), "root", r.cfg.RootDir, "pod_ip", r.podIP)
	err := s.Serve(l)
	if ctx.Err() != nil || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// ListenAndServe is Listen followed by Serve.
func (r *Runtime) ListenAndServe(ctx context.Context, endpoint string) error {
	l, err := Listen(endpoint)
	if err != nil {
		return err
	}
	return r.Serve(ctx, l)
}

// Close stops every running container (their state is recorded as exited)
// and releases the wazero runtime. It is safe to call more than once.
func (r *Runtime) Close() error {
	var err error
	r.closeOnce.Do(func() {
		cs := r.containerList()
		for _, c := range cs {
			r.stopContainer(c, 0)
		}
		err = r.wz.close(context.Background())
		r.lock.Close()
		r.log.Info("runtime closed", "containers_stopped", len(cs))
	})
	return err
}

// lockRoot takes an exclusive lock on the root dir: two runtimes on one
// root would each think the other's containers died.
func lockRoot(root string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(root, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wasiruntime: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("wasiruntime: root dir %s is in use by another runtime: %w", root, err)
	}
	return f, nil
}

// nodeIP returns the first non-loopback IPv4 address of an up interface.
func nodeIP() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// containerList is a snapshot of the runtime's containers, taken under
// its lock, for callers that lock each container in turn.
func (r *Runtime) containerList() []*container {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := make([]*container, 0, len(r.containers))
	for _, c := range r.containers {
		cs = append(cs, c)
	}
	return cs
}
