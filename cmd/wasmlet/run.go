package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wasmlet/wasmlet/host/agent"
	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
)

func init() {
	register("run", command{
		summary: "run the node agent (flags, or --config FILE with kind WasmletConfiguration)",
		run:     runRun,
	})
}

// runFlags is the flag set of `wasmlet run`: --config, and the flags of
// the configuration's fields bound to c.
func runFlags(c *v1alpha1.WasmletConfiguration, configFile *string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("wasmlet run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(configFile, "config", *configFile, "config `file` (YAML or JSON, kind "+v1alpha1.Kind+"); flags given override it")
	c.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: wasmlet run [flags]\n\nRuns the node agent until SIGTERM or SIGINT.\n\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// loadRunConfig turns the arguments of `wasmlet run` into the node's
// configuration, as the kubelet does: the --config file, then the flags
// given over it, then the defaults of what neither set; then it is checked.
func loadRunConfig(args []string, stderr io.Writer) (v1alpha1.WasmletConfiguration, error) {
	var c v1alpha1.WasmletConfiguration
	file := ""
	fs := runFlags(&c, &file, stderr)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if file != "" {
		var err error
		if c, err = v1alpha1.LoadFile(file); err != nil {
			return c, err
		}
		// Parse again over the file's values: only the flags given change
		// them.
		if err := runFlags(&c, &file, stderr).Parse(args); err != nil {
			return c, err
		}
	}
	c.SetDefaults()
	if errs := c.Validate(); len(errs) > 0 {
		return c, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	return c, nil
}

// DefaultGCPercent is the agent's garbage collection target when the GOGC
// environment variable does not set one: a collection when the heap has
// grown by half over what the last one left, not by all of it (Go's 100).
// A node agent's heap is mostly caches it keeps (pods, statuses, informers),
// so the headroom is memory taken from the node's pods; the collector runs
// twice as often for it, on an agent whose CPU is a fraction of the
// kubelet's (RATIONALE: "The agent collects its garbage at GOGC=50").
const DefaultGCPercent = 50

// setGCPercent sets DefaultGCPercent unless env (the GOGC variable, which
// the Go runtime has already applied) is set; it returns the setting in
// force, as GOGC spells it.
func setGCPercent(env string) string {
	if env != "" {
		return env
	}
	debug.SetGCPercent(DefaultGCPercent)
	return strconv.Itoa(DefaultGCPercent)
}

// runRun is `wasmlet run`: the agent until SIGTERM or SIGINT.
func runRun(args []string, _, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		// After the first signal, a second one kills the process at once.
		<-ctx.Done()
		stop()
	}()
	return runAgent(ctx, args, stderr)
}

// runAgent runs `wasmlet run` until ctx is done; it returns the exit code.
func runAgent(ctx context.Context, args []string, stderr io.Writer) int {
	c, err := loadRunConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet run: %v\n", err)
		return 2
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: "wasmlet", Level: hclog.LevelFromString(c.LogLevel), JSONFormat: c.LogJSON, Output: stderr,
	})
	gogc := setGCPercent(os.Getenv("GOGC"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a, err := agent.NewContext(ctx, agent.Config{WasmletConfiguration: c, Logger: log, Registerer: reg})
	if errors.Is(err, context.Canceled) {
		log.Info("stopped before the agent was built", "reason", err)
		return 0
	}
	if err != nil {
		log.Error("cannot create the agent", "error", err)
		return 1
	}
	log.Info("starting", "node", c.NodeName, "pod_manifest_path", c.StaticPodPath, "runtime_endpoint", c.ContainerRuntimeEndpoint,
		"plugin_dir", c.PluginDir, "root_dir", c.RootDir, "read_only", fmt.Sprintf("%s:%d", c.Address, *c.ReadOnlyPort), "gogc", gogc)
	err = a.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("agent failed", "error", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
