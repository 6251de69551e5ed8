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

// focusOf is a focus matching exactly the given specs: ginkgo matches it
// against the suite's description, a space and the spec's full text.
func focusOf(suite string, specs []ginkgoSpec) string {
	alts := make([]string, len(specs))
	for i, s := range specs {
		alts[i] = regexp.QuoteMeta(suite + " " + s.fullText())
	}
	if len(alts) == 1 {
		return "^" + alts[0] + "$"
	}
	return "^(?:" + strings.Join(alts, "|") + ")$"
}

// runAll runs the specs, each unit (a spec, or the specs of one Ordered
// container) in its own e2e.test process, cfg.Parallel at a time, and
// returns their results in the listing's order.
func runAll(ctx context.Context, cfg runConfig, suite string, specs []ginkgoSpec, groups [][]int) []Spec {
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
	next := make(chan []int)
	for w := 0; w < cfg.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				mu.Lock()
				running[u[0]] = time.Now()
				mu.Unlock()
				rs := runUnit(ctx, cfg, suite, u, specs)
				mu.Lock()
				delete(running, u[0])
				for k, i := range u {
					r := rs[k]
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
				}
				mu.Unlock()
			}
		}()
	}
	for _, u := range groups {
		select {
		case next <- u:
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

// runUnit runs the specs of one unit (their indexes in specs) in one
// process and reads their results from the report it writes, in the
// unit's order. The process's log and report are in specs/NNN of the
// unit's first spec.
func runUnit(ctx context.Context, cfg runConfig, suite string, unit []int, specs []ginkgoSpec) []Spec {
	res := make([]Spec, len(unit))
	mine := make([]ginkgoSpec, len(unit))
	for k, i := range unit {
		mine[k] = specs[i]
		res[k] = Spec{Name: specs[i].fullText(), File: shortFile(specs[i].LeafNodeLocation.FileName)}
	}
	fail := func(msg string) []Spec {
		for k := range res {
			res[k].State, res[k].Failure = "failed", msg
		}
		return res
	}
	dir := filepath.Join(cfg.Out, "specs", fmt.Sprintf("%03d", unit[0]+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("harness: " + err.Error())
	}
	report := filepath.Join(dir, "report.json")
	args := append(append([]string{}, cfg.Args...), "--ginkgo.no-color", "--ginkgo.focus", focusOf(suite, mine),
		"--ginkgo.json-report", report)
	if cfg.OutputDirFlag != "" {
		args = append(args, cfg.OutputDirFlag, dir)
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return fail("harness: " + err.Error())
	}
	defer logf.Close()
	for _, r := range res {
		fmt.Fprintf(logf, "# %s\n", r.Name)
	}
	cmd := exec.Command(cfg.E2E, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return fail("harness: start e2e.test: " + err.Error())
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	killed := ""
	limit := cfg.Timeout * time.Duration(len(unit))
	select {
	case <-waited:
	case <-time.After(limit):
		killed = fmt.Sprintf("the spec's process ran past the harness's %v limit", limit)
		stop(cmd, waited)
	case <-ctx.Done():
		killed = "the harness was interrupted while this spec ran"
		stop(cmd, waited)
	}
	seconds := time.Since(began).Seconds()
	_, got, err := readSpecs(report)
	for k := range res {
		r := &res[k]
		r.Seconds = seconds
		if err != nil {
			r.State, r.Failure = "failed", "no report from e2e.test: "+err.Error()
		} else {
			var runTime time.Duration
			r.State, r.Failure, runTime = specResult(r.Name, got, len(unit))
			if runTime > 0 {
				r.Seconds = runTime.Seconds()
			}
		}
		if killed != "" {
			if passed(r.State) || r.State == "skipped" {
				r.State = "timedout"
			}
			r.Failure = strings.TrimSpace(killed + "\n" + r.Failure)
		}
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

// specResult is the state, failure and run time of the spec named name in
// the report of its unit's process (got, for a unit of n specs). A spec the
// report lacks or holds twice, a process that ran more specs than its
// unit's, and a spec ginkgo left out because the focus missed it (skipped
// with no reason: a spec that skips itself gives one) are harness defects,
// shown as failures rather than hidden.
func specResult(name string, got []ginkgoSpec, n int) (string, string, time.Duration) {
	ran := 0
	var found []ginkgoSpec
	for _, g := range got {
		if g.State != "skipped" && g.State != "pending" {
			ran++
		}
		if g.fullText() == name {
			found = append(found, g)
		}
	}
	switch {
	case len(found) != 1 || ran > n:
		return "failed", fmt.Sprintf("harness: the report has %d specs of this text and %d run, want 1 of %d", len(found), ran, n), 0
	case found[0].State == "skipped" && strings.TrimSpace(found[0].Failure.Message) == "":
		return "failed", "harness: the spec was not run (skipped with no reason: its focus did not match it)", 0
	}
	return found[0].State, found[0].Failure.Message, found[0].RunTime
}
