package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/wasmlet/wasmlet/host/fleet"
)

func init() {
	register("fleet", command{
		summary: "the cluster's WasmletPlugins across its nodes (fleet status)",
		run:     runFleet,
	})
}

// runFleet is `wasmlet fleet status`: per WasmletPlugin, how many nodes
// enforce which digest, which report errors, or that it matches no node.
func runFleet(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, "usage: wasmlet fleet status [--kubeconfig FILE]")
		return 2
	}
	fs := flag.NewFlagSet("fleet status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet fleet status: kubeconfig: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fl, err := fleet.Status(ctx, rc)
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet fleet status: %v\n", err)
		return 1
	}
	fleet.Print(stdout, fl)
	return 0
}
