package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wasmlet/wasmlet/hack/internal/procfs"
)

// FleetLabel is the node label that tells the fleets apart; its value is
// the fleet's kind.
const FleetLabel = "bench.wasmlet.dev/fleet"

// Kinds of fleet.
const (
	KindWasmlet  = "wasmlet"
	KindKubemark = "kubemark"
)

// Agent is one node's agent process.
type Agent struct {
	// Node is the node's name.
	Node string
	// Dir holds its state and log.
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Fleet is the agents of one kind, one per node.
type Fleet struct {
	Kind   string
	Agents []*Agent
	// before are the hollow kubelets' leftovers there were before the
	// fleet started.
	before map[string]bool
}

// hollowLeftovers are what a hollow kubelet leaves in /tmp, whatever
// TMPDIR says, when it is stopped: its root (k8s.io/kubernetes
// pkg/kubemark, /tmp/hollow-kubelet.<random>) and its fake runtime's
// socket (k8s.io/cri-client/pkg/fake, /tmp/kubelet_remote_<random>.sock).
var hollowLeftovers = []string{"/tmp/hollow-kubelet.*", "/tmp/kubelet_remote_*.sock"}

// globSet is the set of paths matching any of patterns.
func globSet(patterns []string) map[string]bool {
	out := map[string]bool{}
	for _, pat := range patterns {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			out[p] = true
		}
	}
	return out
}

// Users is the audit user of every node of the fleet.
func (f *Fleet) Users() map[string]bool {
	u := map[string]bool{}
	for _, a := range f.Agents {
		u["system:node:"+a.Node] = true
	}
	return u
}

// Names is the set of the fleet's node names.
func (f *Fleet) Names() map[string]bool {
	n := map[string]bool{}
	for _, a := range f.Agents {
		n[a.Node] = true
	}
	return n
}

// nodeName is node i's name in a fleet of kind.
func nodeName(kind string, i int) string { return fmt.Sprintf("%s-%03d", kind, i) }

// prepare makes each node's directory and client certificate (cluster.sh
// node) and, for wasmlet, imports the pods' module into its runtime's
// image store; two at a time.
func prepare(ctx context.Context, cfg *Config, kind string, round int) (*Fleet, error) {
	f := &Fleet{Kind: kind}
	for i := range cfg.Nodes {
		// A directory per round: a later round's agents start as new
		// nodes, with nothing (a plugin cache, pod state) left by the
		// round before.
		dir := filepath.Join(cfg.Base, kind, "r"+strconv.Itoa(round), strconv.Itoa(i))
		f.Agents = append(f.Agents, &Agent{Node: nodeName(kind, i), Dir: dir})
	}
	sem := make(chan struct{}, 2)
	errs := make([]error, len(f.Agents))
	var wg sync.WaitGroup
	for i, a := range f.Agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = a.prepare(ctx, cfg, kind)
		}()
	}
	wg.Wait()
	return f, errors.Join(errs...)
}

func (a *Agent) prepare(ctx context.Context, cfg *Config, kind string) error {
	if err := os.MkdirAll(filepath.Join(a.Dir, "plugins"), 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(cfg.Hack, "apiserver", "cluster.sh"), "node", cfg.Cluster, a.Node).CombinedOutput()
	if err != nil {
		return fmt.Errorf("node %s: cluster.sh node: %v: %s", a.Node, err, out)
	}
	if kind != KindWasmlet {
		return nil
	}
	out, err = exec.CommandContext(ctx, cfg.Wasmlet, "runtime", "import", "--root-dir", filepath.Join(a.Dir, "root", "runtime"),
		PodImage, cfg.PodModule).CombinedOutput()
	if err != nil {
		return fmt.Errorf("node %s: wasmlet runtime import %s: %v: %s", a.Node, cfg.PodModule, err, out)
	}
	return nil
}

// PodImage is the image of the benchmark's pods: on wasmlet nodes a tiny
// WASI module imported into each node's image store; kubemark's fake
// runtime runs any name.
const PodImage = "wasmlet.local/idle:1.0"

// args is the agent's command line: node i of the fleet.
func (a *Agent) args(cfg *Config, kind string, i int) (string, []string, []string) {
	kubeconfig := filepath.Join(cfg.Cluster, "node-"+a.Node+".kubeconfig")
	port := cfg.PortBase + 2*i
	label := FleetLabel + "=" + kind
	if kind == KindKubemark {
		// The hollow kubelet makes its root under TMPDIR.
		return cfg.Kubemark, []string{"--morph=kubelet", "--name=" + a.Node, "--kubeconfig=" + kubeconfig,
			"--kubelet-port=" + strconv.Itoa(port), "--kubelet-read-only-port=0", "--node-labels=" + label,
			"--use-host-image-service=false"}, []string{"TMPDIR=" + a.Dir}
	}
	args := []string{"run", "--node-name", a.Node, "--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(a.Dir, "root"), "--pod-logs-dir", filepath.Join(a.Dir, "logs"),
		"--container-log-symlink-dir", "none", "--port", strconv.Itoa(port), "--healthz-port", strconv.Itoa(port + 1),
		"--read-only-port", "0", "--node-labels", label, "--client-ca-file", filepath.Join(cfg.Cluster, "pki", "ca.crt"),
		"--plugin-dir", filepath.Join(a.Dir, "plugins")}
	if cfg.RegistryConfig != "" {
		args = append(args, "--plugin-registry-config", cfg.RegistryConfig, "--plugin-registry-ca", cfg.RegistryCA)
	}
	return cfg.Wasmlet, append(args, strings.Fields(cfg.WasmletArgs)...), nil
}

// start starts every agent, at rate per second.
func (f *Fleet) start(ctx context.Context, cfg *Config) error {
	if f.Kind == KindKubemark {
		f.before = globSet(hollowLeftovers)
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.StartRate))
	defer tick.Stop()
	for i, a := range f.Agents {
		bin, args, env := a.args(cfg, f.Kind, i)
		logf, err := os.Create(filepath.Join(a.Dir, "agent.log"))
		if err != nil {
			return err
		}
		a.cmd = exec.Command(bin, args...)
		a.cmd.Env = append(os.Environ(), env...)
		a.cmd.Stdout, a.cmd.Stderr = logf, logf
		a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := a.cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("node %s: %w", a.Node, err)
		}
		a.done = make(chan struct{})
		go func() { a.cmd.Wait(); logf.Close(); close(a.done) }()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Exited names the agents that are no longer running.
func (f *Fleet) Exited() []string {
	var out []string
	for _, a := range f.Agents {
		if a.done == nil {
			continue
		}
		select {
		case <-a.done:
			out = append(out, a.Node)
		default:
		}
	}
	return out
}

// stop sends SIGTERM to every agent and SIGKILL to those still there
// after grace.
func (f *Fleet) stop(grace time.Duration) {
	for _, a := range f.Agents {
		if a.cmd != nil && a.cmd.Process != nil {
			a.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(grace)
	for _, a := range f.Agents {
		if a.done == nil {
			continue
		}
		select {
		case <-a.done:
		case <-deadline:
			a.cmd.Process.Kill()
			<-a.done
		}
	}
	if f.Kind == KindKubemark {
		for p := range globSet(hollowLeftovers) {
			if !f.before[p] {
				os.RemoveAll(p)
			}
		}
	}
}

// usage is the summed CPU time and RSS of the fleet's running agents, and
// how many were read.
func (f *Fleet) usage() (procfs.Usage, int) {
	var sum procfs.Usage
	n := 0
	for _, a := range f.Agents {
		if a.cmd == nil || a.cmd.Process == nil {
			continue
		}
		u, err := procfs.Read(a.cmd.Process.Pid)
		if err != nil {
			continue
		}
		sum.CPU += u.CPU
		sum.RSS += u.RSS
		sum.Anon += u.Anon
		n++
	}
	return sum, n
}
