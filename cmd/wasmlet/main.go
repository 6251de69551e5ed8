// Command wasmlet is a node agent in the kubelet's mould whose site-specific
// parts are WebAssembly plugins. `wasmlet run` is the daemon; the other
// subcommands are tools for plugin authors and policy teams.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so the files stay independent of each other. run returns the exit
// status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: wasmlet <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n`wasmlet <command> -h` shows a command's usage.")
}

func main() { os.Exit(wasmlet(os.Args[1:], os.Stdout, os.Stderr)) }

// wasmlet runs the command line args (without the program name) and returns
// the exit status. Asking for help is not an error: usage goes to stdout and
// the status is 0. No command or an unknown one prints usage to stderr, 2.
func wasmlet(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wasmlet: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}
