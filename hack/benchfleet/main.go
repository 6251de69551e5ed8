// Command benchfleet is the fleet benchmark of make bench-fleet
// (hack/bench-fleet.sh starts the control plane and the registry, then runs
// it): NODES wasmlet agents on the embedded WASI runtime, then NODES
// kubemark hollow kubelets, each fleet joined to the same API server in
// turn, with what each node costs the control plane (requests by verb and
// resource from the audit log, watches open, the API server's and etcd's
// CPU and memory), what an agent costs, pod start latency, lease renewals,
// and for wasmlet the time a WasmletPlugin takes to be enforced on every
// node. Prints one table, the fleets side by side.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is what a run measures and with what.
type Config struct {
	// Cluster is the directory of hack/apiserver/cluster.sh up: the admin
	// kubeconfig, the PKI, the audit log, the pid files.
	Cluster string
	// Hack is the repository's hack directory.
	Hack string
	// Base is where the nodes' directories go.
	Base string
	// Wasmlet, Kubemark and Kubectl are the programs.
	Wasmlet, Kubemark, Kubectl string
	// WasmletArgs are extra arguments of wasmlet run.
	WasmletArgs string
	// PodModule is the WASI module imported into each wasmlet node as
	// PodImage.
	PodModule string
	// Fleets are the kinds to run, in order.
	Fleets []string
	// Nodes is the number of nodes of each fleet, PodsPerNode the pods
	// created per node, Rounds how many times each fleet runs.
	Nodes, PodsPerNode, Rounds int
	// StartRate is agents started per second; CreateRate pods created per
	// second.
	StartRate, CreateRate float64
	// Idle is the window measured with every node Ready and no pods.
	Idle time.Duration
	// Settle is how long the pods window goes on once every pod is
	// Running: the window is their start and that much of their running.
	Settle time.Duration
	// LeaseLate and LeaseMissed are the renewal gaps counted late and
	// missed.
	LeaseLate, LeaseMissed time.Duration
	// PortBase is the first of the nodes' ports (two per node).
	PortBase int
	// RolloutTimeout is how long the rollout may take to reach every node
	// beyond its spread.
	RolloutTimeout time.Duration
	// RolloutSpread is the WasmletPlugin's spec.rollout.spread (the
	// manifest's; here for the table and the timeout).
	RolloutSpread time.Duration
	// Plugin is a WasmletPlugin manifest applied to the wasmlet fleet;
	// PluginName and PluginDigest what every node must report enforced.
	Plugin, PluginName, PluginDigest string
	// RegistryConfig and RegistryCA are the registry's credentials and CA
	// for the agents; RegistryLog its access log.
	RegistryConfig, RegistryCA, RegistryLog string
	// MinAvailable is the least available memory (bytes) a fleet may leave
	// the machine: below it the fleet is stopped and its result says so.
	MinAvailable int64
	// Out is the directory the table is written to.
	Out string
}

func main() {
	var cfg Config
	var fleets string
	flag.StringVar(&cfg.Cluster, "cluster", "", "directory of hack/apiserver/cluster.sh up (admin kubeconfig, pki, audit.log, pid files)")
	flag.StringVar(&cfg.Hack, "hack", "hack", "the repository's hack directory")
	flag.StringVar(&cfg.Base, "base", "", "directory for the nodes' state (short: unix sockets live under it)")
	flag.StringVar(&cfg.Wasmlet, "wasmlet", "bin/wasmlet", "the wasmlet binary")
	flag.StringVar(&cfg.Kubemark, "kubemark", "", "the kubemark binary (hack/kube/build.sh kubemark)")
	flag.StringVar(&cfg.Kubectl, "kubectl", "", "the kubectl binary")
	flag.StringVar(&cfg.WasmletArgs, "wasmlet-args", "", "extra wasmlet run arguments")
	flag.StringVar(&cfg.PodModule, "pod-module", "", "the WASI module of the pods on wasmlet nodes")
	flag.StringVar(&fleets, "fleets", "wasmlet,kubemark", "the fleets to run, in order")
	flag.IntVar(&cfg.Nodes, "nodes", 100, "nodes per fleet")
	flag.IntVar(&cfg.PodsPerNode, "pods-per-node", 5, "pods created per node")
	flag.IntVar(&cfg.Rounds, "rounds", 1, "rounds (each runs every fleet)")
	flag.Float64Var(&cfg.StartRate, "start-rate", 5, "agents started per second")
	flag.Float64Var(&cfg.CreateRate, "create-rate", 20, "pods created per second")
	flag.DurationVar(&cfg.Idle, "idle", 2*time.Minute, "the idle window")
	flag.DurationVar(&cfg.Settle, "settle", time.Minute, "how long the pods window goes on after every pod is Running")
	flag.DurationVar(&cfg.LeaseLate, "lease-late", 11*time.Second, "a lease renewal this long after the last counts late (10 s, its jitter, a request's latency)")
	flag.DurationVar(&cfg.LeaseMissed, "lease-missed", 40*time.Second, "a lease renewal this long after the last counts missed (the node monitor grace period)")
	flag.IntVar(&cfg.PortBase, "port-base", 31000, "the first node port (kubelet API; wasmlet's healthz the next)")
	flag.DurationVar(&cfg.RolloutTimeout, "rollout-timeout", 10*time.Minute, "how long the plugin rollout may take to reach every node, beyond its spread")
	flag.DurationVar(&cfg.RolloutSpread, "rollout-spread", 0, "the WasmletPlugin's spec.rollout.spread, as the manifest says it")
	flag.StringVar(&cfg.Plugin, "plugin", "", "a WasmletPlugin manifest to roll out to the wasmlet fleet")
	flag.StringVar(&cfg.PluginName, "plugin-name", "", "the plugin's name")
	flag.StringVar(&cfg.PluginDigest, "plugin-digest", "", "the digest every node must enforce")
	flag.StringVar(&cfg.RegistryConfig, "registry-config", "", "the registry's docker config.json, for the agents")
	flag.StringVar(&cfg.RegistryCA, "registry-ca", "", "the registry's CA, for the agents")
	flag.StringVar(&cfg.RegistryLog, "registry-log", "", "the registry's log (its access lines are counted)")
	flag.Int64Var(&cfg.MinAvailable, "min-available-mib", 2048, "stop a fleet when the machine's available memory falls below this many MiB")
	flag.StringVar(&cfg.Out, "out", "build/bench-fleet", "where the table is written")
	flag.Parse()
	cfg.Fleets = strings.Split(fleets, ",")
	cfg.MinAvailable <<= 20
	if err := cfg.check(); err != nil {
		fatalf("%v", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, &cfg); err != nil {
		fatalf("%v", err)
	}
}

// check refuses a configuration that cannot run, naming the flag.
func (c *Config) check() error {
	if c.Cluster == "" || c.Base == "" {
		return fmt.Errorf("-cluster and -base are required")
	}
	if c.Nodes < 1 || c.PodsPerNode < 0 || c.Rounds < 1 || c.StartRate <= 0 || c.CreateRate <= 0 {
		return fmt.Errorf("-nodes %d, -rounds %d, -start-rate %g, -create-rate %g must be positive, -pods-per-node %d not negative",
			c.Nodes, c.Rounds, c.StartRate, c.CreateRate, c.PodsPerNode)
	}
	for _, f := range c.Fleets {
		switch f {
		case KindWasmlet:
			if c.PodModule == "" {
				return fmt.Errorf("-fleets %s: -pod-module is required", f)
			}
		case KindKubemark:
			if c.Kubemark == "" {
				return fmt.Errorf("-fleets %s: -kubemark is required", f)
			}
		default:
			return fmt.Errorf("-fleets: unknown fleet %q (want wasmlet or kubemark)", f)
		}
	}
	if c.Plugin != "" && (c.PluginName == "" || c.PluginDigest == "" || c.Kubectl == "") {
		return fmt.Errorf("-plugin needs -plugin-name, -plugin-digest and -kubectl")
	}
	return nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchfleet: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchfleet: %s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// run runs every round of every fleet and prints the table.
func run(ctx context.Context, cfg *Config) error {
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(cfg.Cluster, "admin.kubeconfig"))
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, client: client, rc: rc}
	if b.apiserver, err = pidFile(filepath.Join(cfg.Cluster, "kube-apiserver.pid")); err != nil {
		return err
	}
	if b.etcd, err = pidFile(filepath.Join(cfg.Cluster, "etcd.pid")); err != nil {
		return err
	}
	var results []*Result
	for round := 1; round <= cfg.Rounds; round++ {
		for _, kind := range cfg.Fleets {
			r := b.fleet(ctx, kind, round)
			results = append(results, r)
			if r.Err != "" {
				logf("%s round %d: %s", kind, round, r.Err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	var sb strings.Builder
	printTable(&sb, cfg, results)
	fmt.Print(sb.String())
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	name := filepath.Join(cfg.Out, fmt.Sprintf("bench-fleet-%d-nodes-%s.txt", cfg.Nodes, time.Now().UTC().Format("20060102T150405Z")))
	if err := os.WriteFile(name, []byte(sb.String()), 0o644); err != nil {
		return err
	}
	logf("table written to %s", name)
	for _, r := range results {
		if r.Err != "" {
			return fmt.Errorf("%s round %d: %s", r.Kind, r.Round, r.Err)
		}
	}
	return nil
}

// pidFile reads a pid file.
func pidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}

// kubectl runs kubectl with the admin kubeconfig.
func (b *bench) kubectl(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, b.cfg.Kubectl, append([]string{"--kubeconfig", filepath.Join(b.cfg.Cluster, "admin.kubeconfig")}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
