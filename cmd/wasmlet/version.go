package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/wasmlet/wasmlet/host/agent"
)

func init() {
	register("version", command{
		summary: "print the version, commit, Go version and wazero version (also --version)",
		run:     runVersion,
	})
}

// commit and modified name the source the binary was built from when the go
// command could not stamp it (a git worktree, GOFLAGS=-buildvcs=false); the
// Makefile sets them with -ldflags -X. Build info's vcs.revision and
// vcs.modified win when present.
var (
	commit   string
	modified string // "true" when the tree had uncommitted changes
)

const wazeroPath = "github.com/tetratelabs/wazero"

// versionInfo is what `wasmlet version` prints, as key/value pairs in order:
// version (the kubelet version the node reports, agent.Version), commit
// (with " (modified)" for a dirty tree), go and wazero. A value the binary
// does not know is "unknown".
func versionInfo(bi *debug.BuildInfo, ok bool) [][2]string {
	rev, dirty, goVersion, wazero := commit, modified == "true", "unknown", "unknown"
	if ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == wazeroPath {
				wazero = d.Version
				if r := d.Replace; r != nil {
					wazero += " => " + r.Path
					if r.Version != "" {
						wazero += " " + r.Version
					}
				}
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	} else if dirty {
		rev += " (modified)"
	}
	return [][2]string{{"version", agent.Version}, {"commit", rev}, {"go", goVersion}, {"wazero", wazero}}
}

// runVersion is `wasmlet version`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wasmlet version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wasmlet version\n\nPrints the build, one \"key: value\" per line: version, commit, go, wazero.")
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	for _, kv := range versionInfo(bi, ok) {
		fmt.Fprintf(stdout, "%s: %s\n", kv[0], kv[1])
	}
	return 0
}
