package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/plugin"
)

func init() {
	register("admit", command{
		summary: "ask an admission plugin about a pod: admit --plugin FILE.wasm [--config K=V]... POD.yaml",
		run:     runAdmit,
	})
}

// Exit statuses of `wasmlet admit`, like a policy check's.
const (
	exitAllowed = 0
	exitDenied  = 1
	exitError   = 2
)

// keyValues is a repeatable KEY=VALUE flag.
type keyValues map[string]string

func (kv keyValues) String() string { return fmt.Sprint(map[string]string(kv)) }

func (kv keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	kv[k] = v
	return nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// runAdmit is `wasmlet admit`.
func runAdmit(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pluginPath := fs.String("plugin", "", "the plugin: a .wasm, or a manifest *.plugin.yaml")
	config := keyValues{}
	fs.Var(config, "config", "KEY=VALUE plugin config, merged over the manifest's (repeatable)")
	nodePath := fs.String("node", "", "a v1.Node (YAML or JSON) to send with the pod")
	timeout := fs.Duration("timeout", 0, "per-call deadline (default: the manifest's, else the host's)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wasmlet admit --plugin FILE.wasm [--config KEY=VALUE]... POD.yaml\n\nPrints the verdict and the plugin's mode; exit status 0 allowed, 1 denied, 2 error.\nA plugin in mode monitor admits as the agent does: a denial prints ALLOWED, what it\nwould have decided and why, and exits 0.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitError
	}
	if *pluginPath == "" || len(pos) != 1 {
		fs.Usage()
		return exitError
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "wasmlet admit: %v\n", err)
		return exitError
	}
	pod, err := readObject(pos[0], "pod", &v1.Pod{})
	if err != nil {
		return fail(err)
	}
	req := abi.AdmitRequest{Pod: pod}
	if *nodePath != "" {
		if req.Node, err = readObject(*nodePath, "node", &v1.Node{}); err != nil {
			return fail(err)
		}
	}
	path := *pluginPath
	if mf := manifestBeside(path); mf != "" {
		// As the agent loads it: the manifest's config, deadline, memory
		// cap and permissions, so the verdict is the agent's.
		fmt.Fprintf(stderr, "wasmlet admit: using the manifest beside the module, %s\n", mf)
		path = mf
	} else if strings.HasSuffix(path, ".wasm") {
		fmt.Fprintf(stderr, "wasmlet admit: no manifest beside %s: none is used (no plugin config but --config, the host's defaults)\n", path)
	}
	ctx := context.Background()
	p, err := plugin.Load(ctx, plugin.LoadConfig{
		Path:         path,
		PluginConfig: config,
		Config:       plugin.Config{CacheDir: toolCacheDir(), Timeout: *timeout},
	})
	if err != nil {
		return fail(err)
	}
	defer p.Close(ctx)
	m := p.Manifest()
	if !m.HasKind(abi.KindAdmission) {
		return fail(fmt.Errorf("plugin %s: not an admission plugin (kinds %v)", *pluginPath, m.Kinds))
	}
	mode := abi.ModeEnforce // a bare module's derived manifest has none
	if m.Monitoring() {
		mode = abi.ModeMonitor
	}
	resp, err := p.Admit(ctx, &req)
	if err != nil {
		if mode == abi.ModeMonitor {
			fmt.Fprintln(stderr, "wasmlet admit: the plugin is in mode monitor: the agent would log and count this failure and admit the pod")
		}
		return fail(fmt.Errorf("pod %s: %w", pos[0], err))
	}
	switch {
	case resp.Allowed:
		fmt.Fprintf(stdout, "ALLOWED  %s (plugin %s, mode %s)\n", pos[0], p.Name(), mode)
		return exitAllowed
	case mode == abi.ModeMonitor:
		// As the agent decides: admitted, the denial reported.
		fmt.Fprintf(stdout, "ALLOWED  %s (plugin %s, mode monitor: would be DENIED in mode enforce)\n  reason:  %s\n  message: %s\n", pos[0], p.Name(), resp.Reason, resp.Message)
		return exitAllowed
	}
	fmt.Fprintf(stdout, "DENIED   %s (plugin %s, mode %s)\n  reason:  %s\n  message: %s\n", pos[0], p.Name(), mode, resp.Reason, resp.Message)
	return exitDenied
}

// readObject reads a Kubernetes object from a YAML or JSON file, checks that
// it decodes into into, and returns its JSON. Errors name the file.
func readObject(path, what string, into any) (json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", what, err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	if len(j) == 0 || j[0] != '{' {
		return nil, fmt.Errorf("%s file %s: not an object", what, path)
	}
	if err := json.Unmarshal(j, into); err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	return j, nil
}

// toolCacheDir is where the command-line tools keep wazero's compilation
// cache, so a second run of the same plugin starts fast.
func toolCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wasmlet", "compile")
}
