package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// metric is one row of the table.
type metric struct {
	name   string
	unit   string
	get    func(r Result) Figure
	probes bool // a row of -probes runs only
}

var metrics = []metric{
	{"first Running", "s", func(r Result) Figure { return r.First }, false},
	{"median Running", "s", func(r Result) Figure { return r.Median }, false},
	{"all Running", "s", func(r Result) Figure { return r.All }, false},
	{"all stopped after delete", "s", func(r Result) Figure { return r.Stopped }, false},
	{"deleted gone from /pods", "s", func(r Result) Figure { return r.Gone }, false},
	{"agent CPU to start", "s", func(r Result) Figure { return r.CPUStart }, false},
	{"agent CPU to stop", "s", func(r Result) Figure { return r.CPUStop }, false},
	{"runtime CPU to start", "s", func(r Result) Figure { return r.RuntimeCPUStart }, false},
	{"  of it containerd itself", "s", func(r Result) Figure { return r.ContainerdCPUStart }, false},
	{"machine CPU busy, starting", "share", func(r Result) Figure { return r.BusyStart }, false},
	{"runtime CPU to stop", "s", func(r Result) Figure { return r.RuntimeCPUStop }, false},
	{"machine CPU busy, stopping", "share", func(r Result) Figure { return r.BusyStop }, false},
	{"RSS idle", "MB", func(r Result) Figure { return r.RSSIdle }, false},
	{"RSS all running", "MB", func(r Result) Figure { return r.RSSRun }, false},
	{"all Ready (probes)", "s", func(r Result) Figure { return r.Ready }, true},
	{"agent CPU, steady window", "s", func(r Result) Figure { return r.CPUSteady }, true},
	{"runtime CPU, steady window", "s", func(r Result) Figure { return r.RuntimeCPUSteady }, true},
	{"RSS end of window", "MB", func(r Result) Figure { return r.RSSSteady }, true},
	{"restarts in window", "n", func(r Result) Figure { return r.Restarts }, true},
}

// printTable writes, for each pod count, every metric of the first two
// agents (kubelet and wasmlet by default) round by round with the 1-minute
// load average in brackets, and the second/first ratio of each round; then
// the CRI calls of the last round.
func printTable(w io.Writer, cfg Config, results []Result) {
	first, second := cfg.Agents[0], ""
	if len(cfg.Agents) > 1 {
		second = cfg.Agents[1]
	}
	find := func(agent string, n, round int) (Result, bool) {
		for _, r := range results {
			if r.Agent == agent && r.Pods == n && r.Round == round {
				return r, true
			}
		}
		return Result{}, false
	}
	fmt.Fprintf(w, "\nbench-node: %d round(s), figures per round as value [1-min load average]; ratio = %s/%s\n", cfg.Rounds, second, first)
	if cfg.Probes {
		fmt.Fprintf(w, "probes: each pod an httpGet readiness probe (busybox httpd) and an exec liveness probe (/bin/true), period 10 s;\nCPU over a steady window of %v from all pods Ready (runtime = the private containerd and its shims, exec probes' runc included)\n", cfg.Window)
	}
	for _, n := range cfg.Pods {
		fmt.Fprintf(w, "\n%d pod(s)\n", n)
		fmt.Fprintf(w, "| %-28s | %-36s | %-36s | %-18s |\n", "", first, second, "ratio")
		fmt.Fprintf(w, "|%s|%s|%s|%s|\n", strings.Repeat("-", 30), strings.Repeat("-", 38), strings.Repeat("-", 38), strings.Repeat("-", 20))
		for _, m := range metrics {
			if m.probes && !cfg.Probes {
				continue
			}
			var k, wl, ratio []string
			for round := 1; round <= cfg.Rounds; round++ {
				kr, kok := find(first, n, round)
				wr, wok := find(second, n, round)
				if kok {
					k = append(k, fig(m.get(kr)))
				}
				if wok {
					wl = append(wl, fig(m.get(wr)))
				}
				if kok && wok && m.get(kr).V > 0 {
					ratio = append(ratio, fmt.Sprintf("%.2f", m.get(wr).V/m.get(kr).V))
				}
			}
			fmt.Fprintf(w, "| %-28s | %-36s | %-36s | %-18s |\n", m.name+" ("+m.unit+")", strings.Join(k, ", "), strings.Join(wl, ", "), strings.Join(ratio, ", "))
		}
	}
	for _, phase := range []struct {
		name  string
		calls func(Result) []CRICall
	}{{"starting", func(r Result) []CRICall { return r.CRI }}, {"stopping", func(r Result) []CRICall { return r.CRIStop }}} {
		fmt.Fprintf(w, "\nCRI calls while %s (round %d; from each agent's /metrics: wasmlet_cri_call_duration_seconds, kubelet_runtime_operations_duration_seconds)\n", phase.name, cfg.Rounds)
		for _, n := range cfg.Pods {
			for _, agent := range cfg.Agents {
				r, ok := find(agent, n, cfg.Rounds)
				if !ok || len(phase.calls(r)) == 0 {
					continue
				}
				fmt.Fprintf(w, "%s, %d pod(s):", agent, n)
				for _, c := range phase.calls(r) {
					if c.Count == 0 {
						continue
					}
					fmt.Fprintf(w, " %s %.0f×%.0fms", c.Method, c.Count, 1000*c.Sum/c.Count)
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintf(w, "\npods with a running container, once a second after the delete (round %d)\n", cfg.Rounds)
	for _, n := range cfg.Pods {
		for _, agent := range cfg.Agents {
			if r, ok := find(agent, n, cfg.Rounds); ok && len(r.StillRunning) > 0 {
				l := make([]string, len(r.StillRunning))
				for i, v := range r.StillRunning {
					l[i] = fmt.Sprint(v)
				}
				fmt.Fprintf(w, "%s, %d pod(s): %s\n", agent, n, strings.Join(l, " "))
			}
		}
	}
	fmt.Fprintf(w, "\nwasmlet's pod start limit, once a second while starting (round %d)\n", cfg.Rounds)
	for _, n := range cfg.Pods {
		if r, ok := find("wasmlet", n, cfg.Rounds); ok && len(r.Limits) > 0 {
			l := make([]string, len(r.Limits))
			for i, v := range r.Limits {
				l[i] = fmt.Sprintf("%.1f", v)
			}
			fmt.Fprintf(w, "%d pod(s): %s\n", n, strings.Join(l, " "))
		}
	}
}

func fig(f Figure) string {
	v := fmt.Sprintf("%.2f", f.V)
	if math.Abs(f.V) >= 10 {
		v = fmt.Sprintf("%.1f", f.V)
	}
	return fmt.Sprintf("%s [%.1f]", v, f.Load)
}
