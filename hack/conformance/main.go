// Command conformance runs the upstream Kubernetes [NodeConformance] e2e
// specs against a node, one spec per e2e.test process (the specs of an
// Ordered container share one), a few at a time, and
// writes the results; hack/conformance.sh starts the cluster and the node
// around it (see the README's "Conformance" section).
//
//	conformance run -e2e E2E.TEST -out DIR -node NAME [-suite e2e|e2e_node] [-tags both|node|conformance] [-focus RE] [-skip RE] [-files RE] [-source DIR] [-output-dir-flag F] [-parallel N] [-timeout D] [-durations FILE] -- E2E-ARGS...
//	conformance compare WASMLET/summary.json KUBELET/summary.json
//
// run writes DIR/summary.json, DIR/junit.xml, DIR/table.txt and, per spec,
// DIR/specs/NNN/{log,report.json}; it prints one progress line per spec.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		if err := runCmd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(1)
		}
	case "compare":
		if len(os.Args) != 4 {
			usage()
		}
		w, err := readSummary(os.Args[2])
		if err == nil {
			var k *Summary
			if k, err = readSummary(os.Args[3]); err == nil {
				writeComparison(os.Stdout, w, k)
				return
			}
		}
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: conformance run -e2e E2E.TEST -out DIR -node NAME [-suite e2e|e2e_node] [-tags both|node|conformance] [-focus RE] [-skip RE] [-files RE] [-source DIR] [-output-dir-flag F] [-parallel N] [-timeout D] [-durations FILE] -- E2E-ARGS...")
	fmt.Fprintln(os.Stderr, "       conformance compare WASMLET/summary.json KUBELET/summary.json")
	os.Exit(2)
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	cfg := runConfig{Progress: os.Stdout}
	fs.StringVar(&cfg.E2E, "e2e", "", "the e2e.test binary")
	fs.StringVar(&cfg.Out, "out", "", "the result directory")
	fs.StringVar(&cfg.Node, "node", "wasmlet", "the node under test, for the results")
	suiteName := fs.String("suite", "e2e", "the suite: e2e (test/e2e's specs of test/e2e/common) or e2e_node (test/e2e_node's)")
	tags := fs.String("tags", "", "e2e only: the default focus's tags, both ([NodeConformance] and [Conformance], the default), node or conformance")
	focus := fs.String("focus", "", "ginkgo focus (empty: by -suite and -tags)")
	fs.StringVar(&cfg.Skip, "skip", `\[Serial\]|\[Disruptive\]|\[Flaky\]`, "ginkgo skip")
	source := fs.String("source", "", "the directory the suite's source paths are relative to (the Go module cache it was built from), read to find Ordered containers; empty: every spec runs alone")
	files := fs.String("files", "", "keep only the specs whose source file matches this regular expression (empty: /test/e2e/common/ for e2e, every file for e2e_node)")
	fs.StringVar(&cfg.OutputDirFlag, "output-dir-flag", "--e2e-output-dir", "the suite's flag for a spec's output directory (empty: none)")
	fs.IntVar(&cfg.Parallel, "parallel", 3, "specs at once")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Minute, "limit per spec")
	durationsPath := fs.String("durations", "", "a file of the specs' run times in earlier runs (JSON, full text → seconds): the longest start first, and this run's are merged in (empty: listing order, nothing kept)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Args = fs.Args()
	sel, err := newSelection(*suiteName, *tags, *focus, *files)
	if err != nil {
		return err
	}
	cfg.Focus = sel.Focus
	if sel.Files != "" {
		re, err := regexp.Compile(sel.Files)
		if err != nil {
			return fmt.Errorf("-files: %w", err)
		}
		cfg.Files = re
	}
	if cfg.E2E == "" || cfg.Out == "" || cfg.Parallel < 1 {
		usage()
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	suite, specs, err := list(ctx, cfg)
	if err != nil {
		return err
	}
	isOrdered := func(codeLocation) (bool, error) { return false, nil }
	if *source != "" {
		isOrdered = (&orderedSource{root: *source}).ordered
	}
	groups, err := units(specs, isOrdered)
	if err != nil {
		return err
	}
	durations := Durations{}
	if *durationsPath != "" {
		if durations, err = readDurations(*durationsPath); err != nil {
			return fmt.Errorf("-durations: %w", err)
		}
		groups = longestFirst(groups, specs, durations)
	}
	fmt.Printf("conformance %s: %s: %d specs selected (%s, skip %q), %d processes (the specs of an Ordered container share one), %d at a time\n",
		cfg.Node, sel.Title(), len(specs), sel.Filter(), cfg.Skip, len(groups), cfg.Parallel)
	start := time.Now()
	s := &Summary{Node: cfg.Node, Title: sel.Title(), Filter: sel.Filter(), Selection: sel, Specs: runAll(ctx, cfg, suite, specs, groups)}
	if err := writeResults(cfg.Out, s); err != nil {
		return err
	}
	if *durationsPath != "" {
		durations.merge(s.Specs)
		if err := durations.write(*durationsPath); err != nil {
			return fmt.Errorf("-durations: %w", err)
		}
	}
	fmt.Printf("conformance %s: %d passed, %d failed, %d skipped of %d in %s; results in %s\n",
		s.Node, s.Passed, s.Failed, s.Skipped, len(s.Specs), time.Since(start).Round(time.Second), cfg.Out)
	return ctx.Err()
}
