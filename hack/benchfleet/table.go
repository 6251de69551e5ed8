package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// topRows is how many verb+resource rows each request block shows.
const topRows = 8

// row is one line of the table: a label and a cell per result.
type row struct {
	label string
	cell  func(r *Result) string
}

// printTable writes one table, a column per fleet and round, the 1-minute
// load average at the end of each window with it.
func printTable(w io.Writer, cfg *Config, results []*Result) {
	fmt.Fprintf(w, "\nbench-fleet: %d nodes per fleet, %d pods per node, %d round(s); idle window %s; per node unless said\n",
		cfg.Nodes, cfg.PodsPerNode, cfg.Rounds, cfg.Idle)
	fmt.Fprintf(w, "requests from the audit log (user system:node:<name>, by request received); CPU-s per node per minute; MiB\n")
	fmt.Fprintf(w, "with pods: from the first create until %s after the last pod Running; pod start from creationTimestamp (whole seconds) and from the create request\n", cfg.Settle)
	var rows []row
	add := func(label string, cell func(r *Result) string) { rows = append(rows, row{label, cell}) }
	add("nodes Ready / time to all Ready", func(r *Result) string {
		return fmt.Sprintf("%d/%d in %s", r.Ready, r.Nodes, dur(r.ReadyAfter))
	})
	for _, ph := range []struct {
		name string
		get  func(r *Result) *Window
	}{{"idle", func(r *Result) *Window { return &r.Idle }}, {"with pods", func(r *Result) *Window { return &r.Pods }}} {
		add(fmt.Sprintf("requests/node/min %s: total", ph.name), func(r *Result) string {
			return fmt.Sprintf("%.2f (%s window)", ph.get(r).Requests.Total(), dur(ph.get(r).Duration))
		})
		for _, k := range topKeys(results, func(r *Result) Counts { return ph.get(r).Requests }) {
			add("  "+k, func(r *Result) string { return num(ph.get(r).Requests[k]) })
		}
		add(fmt.Sprintf("  of them refused (status >= 400) %s", ph.name), func(r *Result) string { return num(ph.get(r).Refused.Total()) })
		for _, k := range topKeys(results, func(r *Result) Counts { return ph.get(r).Refused }) {
			add("    "+k, func(r *Result) string { return num(ph.get(r).Refused[k]) })
		}
		if ph.name == "idle" {
			add("watches open/node: total", func(r *Result) string { return num(r.Idle.Watches.Total()) })
			for _, k := range topKeys(results, func(r *Result) Counts { return r.Idle.Watches }) {
				add("  "+k, func(r *Result) string { return num(r.Idle.Watches[k]) })
			}
		}
		add("apiserver CPU-s/node/min "+ph.name, func(r *Result) string { return fmt.Sprintf("%.4f", ph.get(r).APIServerCPU) })
		add("etcd CPU-s/node/min "+ph.name, func(r *Result) string { return fmt.Sprintf("%.4f", ph.get(r).EtcdCPU) })
		add("apiserver RSS MiB "+ph.name+" (per node over base)", func(r *Result) string {
			return fmt.Sprintf("%.0f (%.2f)", ph.get(r).APIServerRSS, (ph.get(r).APIServerRSS-r.BaseAPIServerRSS)/float64(r.Nodes))
		})
		add("etcd RSS MiB "+ph.name, func(r *Result) string { return fmt.Sprintf("%.0f", ph.get(r).EtcdRSS) })
		add("agent RSS (anonymous) MiB/node "+ph.name, func(r *Result) string {
			return fmt.Sprintf("%.1f (%.1f)", ph.get(r).AgentRSS, ph.get(r).AgentAnon)
		})
		add("agent CPU-s/node/min "+ph.name, func(r *Result) string { return fmt.Sprintf("%.3f", ph.get(r).AgentCPU) })
		add("load average (1 min) end of "+ph.name, func(r *Result) string { return fmt.Sprintf("%.2f", ph.get(r).Load) })
	}
	add("pods Running / created", func(r *Result) string { return fmt.Sprintf("%d/%d", r.PodsRunning, r.PodsCreated) })
	add("pod start p50/p99/max (SLO: creationTimestamp)", func(r *Result) string {
		return fmt.Sprintf("%s/%s/%s", dur(Percentile(r.SLO, 50)), dur(Percentile(r.SLO, 99)), dur(Percentile(r.SLO, 100)))
	})
	add("pod start p50/p99 (from the create request)", func(r *Result) string {
		return fmt.Sprintf("%s/%s", dur(Percentile(r.Client, 50)), dur(Percentile(r.Client, 99)))
	})
	add("pod start p50/p99 (node-reported: startedAt)", func(r *Result) string {
		return fmt.Sprintf("%s/%s", dur(Percentile(r.Reported, 50)), dur(Percentile(r.Reported, 99)))
	})
	add(fmt.Sprintf("lease renewals late (>%s) / missed (>%s)", cfg.LeaseLate, cfg.LeaseMissed), func(r *Result) string {
		return fmt.Sprintf("%d/%d (max gap %s)", r.Leases.Late, r.Leases.Missed, dur(r.Leases.MaxGap))
	})
	add("  of them in start+idle / pods / rollout", func(r *Result) string {
		return fmt.Sprintf("%d/%d, %d/%d, %d/%d", r.LeasesIdle.Late, r.LeasesIdle.Missed,
			r.LeasesPods.Late, r.LeasesPods.Missed, r.LeasesRollout.Late, r.LeasesRollout.Missed)
	})
	add("nodes NotReady after Ready", func(r *Result) string { return fmt.Sprint(r.NotReady) })
	add(fmt.Sprintf("plugin rollout (spread %s): apply to enforced on all", cfg.RolloutSpread), func(r *Result) string {
		switch {
		case r.Rollout == 0:
			return "-"
		case r.RolloutErr != "":
			return fmt.Sprintf("%d/%d nodes after %s", r.Enforced, r.Nodes, dur(r.Rollout))
		}
		return dur(r.Rollout)
	})
	add("agent CPU-s/node in the rollout", func(r *Result) string {
		if r.Rollout == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", r.RolloutCPU)
	})
	add("agent RSS (anonymous) MiB/node, plugin enforced", func(r *Result) string {
		if r.Rollout == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f (%.1f)", r.RolloutRSS, r.RolloutAnon)
	})
	add("registry requests/node in the rollout", func(r *Result) string {
		if r.Rollout == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", r.RegistryRequests)
	})
	add("error", func(r *Result) string {
		switch {
		case r.Err != "":
			return r.Err
		case r.RolloutErr != "":
			return "rollout: " + r.RolloutErr
		}
		return "-"
	})

	heads := make([]string, len(results))
	for i, r := range results {
		heads[i] = r.Kind
		if cfg.Rounds > 1 {
			heads[i] = fmt.Sprintf("%s r%d", r.Kind, r.Round)
		}
	}
	lw := 0
	for _, rw := range rows {
		lw = max(lw, len(rw.label))
	}
	cw := make([]int, len(results))
	cells := make([][]string, len(rows))
	for i, rw := range rows {
		cells[i] = make([]string, len(results))
		for j, r := range results {
			cells[i][j] = rw.cell(r)
			cw[j] = max(cw[j], len(cells[i][j]), len(heads[j]))
		}
	}
	line := func(label string, cs []string) {
		fmt.Fprintf(w, "| %-*s |", lw, label)
		for j, c := range cs {
			fmt.Fprintf(w, " %-*s |", cw[j], c)
		}
		fmt.Fprintln(w)
	}
	line("", heads)
	sep := make([]string, len(results))
	for j := range sep {
		sep[j] = strings.Repeat("-", cw[j])
	}
	line(strings.Repeat("-", lw), sep)
	for i, rw := range rows {
		line(rw.label, cells[i])
	}
}

// topKeys is the union of each result's topRows largest keys, sorted by
// their largest value.
func topKeys(results []*Result, get func(r *Result) Counts) []string {
	best := map[string]float64{}
	for _, r := range results {
		c := get(r)
		for _, k := range c.Top(topRows) {
			best[k] = max(best[k], c[k])
		}
	}
	return Counts(best).Top(len(best))
}

// num formats a count per node.
func num(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.2f", v)
}

// dur formats a duration to the millisecond, or to the second from a
// minute.
func dur(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}
