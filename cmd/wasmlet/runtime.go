package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wasmlet/wasmlet/host/wasiruntime"
	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

func init() {
	register("runtime", command{
		summary: "run the embedded WASI CRI runtime on its own; `runtime import` adds an image",
		run:     runRuntime,
	})
}

const defaultRuntimeRoot = "/var/lib/wasmlet/runtime"

// runRuntime is `wasmlet runtime`: the embedded runtime until SIGTERM or
// SIGINT, or `wasmlet runtime import`.
func runRuntime(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "import" {
		return runtimeImport(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("wasmlet runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root-dir", defaultRuntimeRoot, "the runtime's state: images, compilation cache, sandboxes, containers")
	listen := fs.String("listen", "", "CRI endpoint to serve (default unix://<root-dir>/cri.sock)")
	podIP := fs.String("pod-ip", "", "IP reported for every pod (default: the node's first non-loopback IPv4)")
	level := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	registryCA := fs.String("registry-ca", "", "PEM `file` of CAs trusted for image registries besides the system's")
	metricsAddr := fs.String("metrics-address", "", "serve Prometheus metrics at http://ADDRESS/metrics (e.g. 127.0.0.1:10256); empty: off")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wasmlet runtime [flags]\n       wasmlet runtime import [--root-dir DIR] [NAME] SOURCE\n\nServes the CRI v1 runtime and image services for WASI modules. PullImage pulls\nWasm images from registries with the request's credentials.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "wasmlet", Level: hclog.LevelFromString(*level), Output: stderr})
	reg := prometheus.NewRegistry()
	rt, err := wasiruntime.New(wasiruntime.Config{RootDir: *root, PodIP: *podIP, RegistryCA: *registryCA, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("start runtime", "error", err)
		return 1
	}
	if *metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Addr: *metricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				log.Error("metrics server", "error", err)
			}
		}()
		defer srv.Close()
	}
	endpoint := *listen
	if endpoint == "" {
		endpoint = rt.Endpoint()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = rt.ListenAndServe(ctx, endpoint)
	if cerr := rt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Error("runtime", "error", err)
		return 1
	}
	return 0
}

// runtimeImport adds a module to the image store, as a running runtime (or
// one started later on the same root dir) will see it.
func runtimeImport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wasmlet runtime import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root-dir", defaultRuntimeRoot, "the runtime's root dir")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wasmlet runtime import [--root-dir DIR] [NAME] SOURCE\n\nSOURCE is a .wasm module, an OCI image layout directory or an image tarball\nwhose layer is a Wasm module. NAME (e.g. wasmlet.local/testbox:1.0) defaults to\nfile://<absolute SOURCE>.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var name, source string
	switch fs.NArg() {
	case 1:
		source = fs.Arg(0)
	case 2:
		name, source = fs.Arg(0), fs.Arg(1)
	default:
		fs.Usage()
		return 2
	}
	abs, err := filepath.Abs(source)
	if err != nil {
		fmt.Fprintln(stderr, "wasmlet runtime import:", err)
		return 1
	}
	if name == "" {
		name = "file://" + abs
	}
	st, err := wasiruntime.OpenImages(*root)
	if err != nil {
		fmt.Fprintln(stderr, "wasmlet runtime import:", err)
		return 1
	}
	img, err := st.Import(name, abs)
	if err != nil {
		fmt.Fprintln(stderr, "wasmlet runtime import:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s %s (%d bytes)\n", image.Normalize(name), img.ID, img.Size)
	if err := wasiruntime.Precompile(context.Background(), *root, img.ID); err != nil {
		fmt.Fprintf(stderr, "wasmlet runtime import: imported, but containers of it will fail: %v\n", err)
		return 1
	}
	return 0
}
