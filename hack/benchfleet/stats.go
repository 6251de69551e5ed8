package main

import (
	"math"
	"sort"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of d, or 0
// for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(s) {
		rank = len(s)
	}
	return s[rank-1]
}

// Leases records the renewals of node Leases: for each node the gaps
// between one renewTime and the next.
type Leases struct {
	// Late is the gap above which a renewal counts late.
	Late time.Duration
	// Missed is the gap above which a renewal counts missed (the node
	// monitor's grace period).
	Missed time.Duration
	last   map[string]time.Time
	maxGap map[string]time.Duration
	late   map[string]int
	missed map[string]int
}

// NewLeases records with the thresholds late and missed.
func NewLeases(late, missed time.Duration) *Leases {
	return &Leases{Late: late, Missed: missed, last: map[string]time.Time{}, maxGap: map[string]time.Duration{},
		late: map[string]int{}, missed: map[string]int{}}
}

// Renewed records that node's Lease was renewed at t; an older or equal
// renewTime (a resync, a write of another field) is no renewal.
func (l *Leases) Renewed(node string, t time.Time) {
	prev, ok := l.last[node]
	if ok && !t.After(prev) {
		return
	}
	l.last[node] = t
	if !ok {
		return
	}
	gap := t.Sub(prev)
	if gap > l.maxGap[node] {
		l.maxGap[node] = gap
	}
	if gap > l.Missed {
		l.missed[node]++
	} else if gap > l.Late {
		l.late[node]++
	}
}

// Nodes is how many nodes have a renewal recorded.
func (l *Leases) Nodes() int { return len(l.last) }

// Counts are the renewals counted late and missed so far, over all nodes
// (a node that stopped renewing is not counted until it renews).
func (l *Leases) Counts() PhaseLeases {
	var c PhaseLeases
	for _, n := range l.late {
		c.Late += n
	}
	for _, n := range l.missed {
		c.Missed += n
	}
	return c
}

// PhaseLeases are the renewals late and missed in one phase of a run.
type PhaseLeases struct{ Late, Missed int }

// Sub is c less an earlier count.
func (c PhaseLeases) Sub(earlier PhaseLeases) PhaseLeases {
	return PhaseLeases{Late: c.Late - earlier.Late, Missed: c.Missed - earlier.Missed}
}

// LeaseSummary is what Leases recorded up to a moment.
type LeaseSummary struct {
	// Late and Missed count the renewals late and missed over all nodes.
	Late, Missed int
	// NodesMissed is how many nodes missed one renewal or more.
	NodesMissed int
	// MaxGap is the longest gap of any node.
	MaxGap time.Duration
}

// Summary is the renewals so far, counting as missed a node whose last
// renewal is older than Missed at now (one that stopped renewing).
func (l *Leases) Summary(now time.Time) LeaseSummary {
	var s LeaseSummary
	for node, last := range l.last {
		s.Late += l.late[node]
		m := l.missed[node]
		if gap := now.Sub(last); gap > l.Missed {
			m++
			if gap > s.MaxGap {
				s.MaxGap = gap
			}
		}
		s.Missed += m
		if m > 0 {
			s.NodesMissed++
		}
		if l.maxGap[node] > s.MaxGap {
			s.MaxGap = l.maxGap[node]
		}
	}
	return s
}
