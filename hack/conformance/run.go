package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runConfig is what a run needs.
type runConfig struct {
	// E2E is the e2e.test binary; Args are passed to every invocation
	// (kubeconfig, provider, kubectl path …).
	E2E  string
	Args []string
	// Focus and Skip select the specs (ginkgo regular expressions).
	Focus, Skip string
	// Files, when set, keeps only the selected specs whose source file
	// matches it (e.g. /test/e2e/common/: the suite's node specs).
	Files *regexp.Regexp
	// OutputDirFlag is the flag that gives a spec's process its output
	// directory (e2e.test's --e2e-output-dir); empty for a suite without
	// one (e2e_node.test).
	OutputDirFlag string
	// Out is the node's result directory (build/conformance/<node>).
	Out string
	// Node names the node under test in the results.
	Node string
	// Parallel is how many specs run at once, each in its own process.
	Parallel int
	// Timeout bounds one spec's process: SIGINT (ginkgo then writes its
	// report), SIGKILL a minute later.
	Timeout time.Duration
	// Progress receives one line per finished spec.
	Progress io.Writer
}

// list asks e2e.test for the selected specs (a dry run), in its order, and
// returns the suite's description too.
func list(ctx context.Context, cfg runConfig) (string, []ginkgoSpec, error) {
	report := filepath.Join(cfg.Out, "list.json")
	args := append(append([]string{}, cfg.Args...), "--ginkgo.dry-run", "--ginkgo.no-color",
		"--ginkgo.focus", cfg.Focus, "--ginkgo.skip", cfg.Skip, "--ginkgo.json-report", report)
	cmd := exec.CommandContext(ctx, cfg.E2E, args...)
	logf, err := os.Create(filepath.Join(cfg.Out, "list.log"))
	if err != nil {
		return "", nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("e2e.test dry run: %w (see %s)", err, logf.Name())
	}
	suite, all, err := readSpecs(report)
	if err != nil {
		return "", nil, err
	}
	var selected []ginkgoSpec
	for _, s := range all {
		if s.State == "skipped" || s.State == "pending" {
			continue
		}
		if cfg.Files != nil && !cfg.Files.MatchString(s.LeafNodeLocation.FileName) {
			continue
		}
		selected = append(selected, s)
	}
	return suite, selected, nil
}

// focusOf is a focus matching exactly one spec: ginkgo matches it against
// the suite's description, a space and the spec's full text.
func focusOf(suite string, s ginkgoSpec) string {
	return "^" + regexp.QuoteMeta(suite+" "+s.fullText()) + "$"
}

// runAll runs each spec in its own e2e.test process, cfg.Parallel at a
// time, and returns their results in the listing's order.
func runAll(ctx context.Context, cfg runConfig, suite string, specs []ginkgoSpec) []Spec {
	results := make([]Spec, len(specs))
	var (
		mu                     sync.Mutex
		done, npassed, nfailed int
		wg                     sync.WaitGroup
	)
	start := time.Now()
	running := map[int]time.Time{}
	// A line a minute while specs run, so a run of long specs is not silent.
	heartbeat := time.NewTicker(time.Minute)
	defer heartbeat.Stop()
	stopBeat := make(chan struct{})
	defer close(stopBeat)
	go func() {
		for {
			select {
			case <-stopBeat:
				return
			case <-heartbeat.C:
				mu.Lock()
				var names []string
				for i, t := range running {
					names = append(names, fmt.Sprintf("#%d %s (%s)", i+1, specs[i].LeafNodeText, time.Since(t).Round(time.Second)))
				}
				sort.Strings(names)
				fmt.Fprintf(cfg.Progress, "conformance %s: %d/%d done, %s elapsed; running: %s\n",
					cfg.Node, done, len(specs), time.Since(start).Round(time.Second), strings.Join(names, "; "))
				mu.Unlock()
			}
		}
	}()
	next := make(chan int)
	for w := 0; w < cfg.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				mu.Lock()
				running[i] = time.Now()
				mu.Unlock()
				r := runOne(ctx, cfg, suite, i, specs[i])
				mu.Lock()
				delete(running, i)
				results[i] = r
				done++
				switch {
				case passed(r.State):
					npassed++
				case r.State != "skipped":
					nfailed++
				}
				fmt.Fprintf(cfg.Progress, "conformance %s: [%d/%d] %-7s %5.0fs %s  (passed %d, not passed %d, %s elapsed)\n",
					cfg.Node, done, len(specs), strings.ToUpper(r.State), r.Seconds, r.Name, npassed, nfailed,
					time.Since(start).Round(time.Second))
				mu.Unlock()
			}
		}()
	}
	for i := range specs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	for i, r := range results {
		if r.Name == "" { // never started: the run was interrupted
			results[i] = Spec{Name: specs[i].fullText(), File: shortFile(specs[i].LeafNodeLocation.FileName), State: "interrupted", Failure: "the harness was interrupted before this spec ran"}
		}
	}
	return results
}

// runOne runs one spec and reads its result from the report it writes.
func runOne(ctx context.Context, cfg runConfig, suite string, i int, s ginkgoSpec) Spec {
	res := Spec{Name: s.fullText(), File: shortFile(s.LeafNodeLocation.FileName)}
	dir := filepath.Join(cfg.Out, "specs", fmt.Sprintf("%03d", i+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.State, res.Failure = "failed", "harness: "+err.Error()
		return res
	}
	report := filepath.Join(dir, "report.json")
	args := append(append([]string{}, cfg.Args...), "--ginkgo.no-color", "--ginkgo.focus", focusOf(suite, s),
		"--ginkgo.json-report", report)
	if cfg.OutputDirFlag != "" {
		args = append(args, cfg.OutputDirFlag, dir)
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		res.State, res.Failure = "failed", "harness: "+err.Error()
		return res
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# %s\n", res.Name)
	cmd := exec.Command(cfg.E2E, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		res.State, res.Failure = "failed", "harness: start e2e.test: "+err.Error()
		return res
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	killed := ""
	select {
	case <-waited:
	case <-time.After(cfg.Timeout):
		killed = fmt.Sprintf("the spec's process ran past the harness's %v limit", cfg.Timeout)
		stop(cmd, waited)
	case <-ctx.Done():
		killed = "the harness was interrupted while this spec ran"
		stop(cmd, waited)
	}
	res.Seconds = time.Since(began).Seconds()
	_, got, err := readSpecs(report)
	var mine []ginkgoSpec
	ran := 0
	for _, g := range got {
		if g.fullText() == res.Name {
			mine = append(mine, g)
		}
		if g.State != "skipped" && g.State != "pending" {
			ran++
		}
	}
	switch {
	case err != nil:
		res.State, res.Failure = "failed", "no report from e2e.test: "+err.Error()
	case len(mine) != 1 || ran > 1:
		// The focus missed the spec or took others too: a harness defect,
		// shown as a failure rather than hidden.
		res.State, res.Failure = "failed", fmt.Sprintf("harness: the report has %d specs of this text and %d run, want 1", len(mine), ran)
	default:
		res.State, res.Failure = mine[0].State, mine[0].Failure.Message
		if mine[0].RunTime > 0 {
			res.Seconds = mine[0].RunTime.Seconds()
		}
	}
	if killed != "" {
		if passed(res.State) || res.State == "skipped" {
			res.State = "timedout"
		}
		res.Failure = strings.TrimSpace(killed + "\n" + res.Failure)
	}
	return res
}

// stop interrupts the spec's process group (ginkgo writes its report and
// cleans up) and kills it a minute later if it is still there.
func stop(cmd *exec.Cmd, waited <-chan error) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-waited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	}
}
