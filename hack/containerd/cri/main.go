// Command cri is a minimal CRI command line for wasmlet's end-to-end
// scripts, since crictl is in no Debian package here:
//
//	cri -e unix:///tmp/wle.x/c.sock wait        wait until the runtime is ready
//	cri -e … ls                                 list sandboxes, containers and images
//	cri -e … [-podnet] run IMAGE CMD [ARGS…]    run a one-container pod (host network unless -podnet)
//	cri -e … rmall                              stop and remove every pod
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/wasmlet/wasmlet/cmd/wasmlet/e2e/cri"
)

func main() {
	endpoint := flag.String("e", "", "CRI endpoint, e.g. unix:///tmp/wle.x/c.sock")
	timeout := flag.Duration("timeout", 2*time.Minute, "overall timeout")
	podNet := flag.Bool("podnet", false, "run: give the pod its own network (CNI) instead of the node's")
	flag.Parse()
	if *endpoint == "" || flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: cri -e ENDPOINT wait|ls|rmall|run IMAGE CMD [ARGS...]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := do(ctx, *endpoint, !*podNet, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "cri %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func do(ctx context.Context, endpoint string, hostNet bool, args []string) error {
	c, err := cri.Connect(ctx, endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	switch args[0] {
	case "wait":
		return c.WaitReady(ctx)
	case "ls":
		c.Dump(ctx, os.Stdout)
		refs, err := c.Images(ctx)
		for _, r := range refs {
			fmt.Println("image", r)
		}
		return err
	case "rmall":
		return c.RemoveAll(ctx, 2)
	case "run":
		if len(args) < 3 {
			return fmt.Errorf("want IMAGE CMD [ARGS...]")
		}
		name := "cri-run-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		start := time.Now()
		sb, ct, err := c.RunPod(ctx, cri.Pod{
			Name: name, Namespace: "default", UID: name, Image: args[1],
			Command: args[2:3], Args: args[3:], HostNetwork: hostNet,
		})
		if err != nil {
			return err
		}
		fmt.Printf("sandbox %s\ncontainer %s\nstarted in %v\n", sb, ct, time.Since(start).Round(time.Millisecond))
		st, err := c.Runtime.PodSandboxStatus(ctx, sb, false)
		if err == nil {
			fmt.Printf("pod IP %s\n", st.GetStatus().GetNetwork().GetIp())
		}
		return err
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}
