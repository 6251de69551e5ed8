// Command wasmlet is a node agent in the kubelet's mould whose site-specific
// parts are WebAssembly plugins. `wasmlet run` is the daemon; the other
// subcommands are tools for plugin authors and policy teams.
package main

import (
	"fmt"
	"os"
	"sort"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so the files stay independent of each other.
type command struct {
	summary string
	run     func(args []string) int
}

var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: wasmlet <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "wasmlet: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}
