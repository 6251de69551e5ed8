package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	s := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Second)
		}
		return d
	}
	for _, c := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", s(3), 99, 3 * time.Second},
		{"median of unsorted", s(5, 1, 4, 2, 3), 50, 3 * time.Second},
		{"p99 of 100 is the 99th", s(seq(100)...), 99, 99 * time.Second},
		{"p99 of 10 is the max", s(seq(10)...), 99, 10 * time.Second},
		{"max", s(2, 9, 1), 100, 9 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.in, c.p); got != c.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestLeases_Summary(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, c := range []struct {
		name   string
		renews map[string][]float64
		now    float64
		want   LeaseSummary
	}{
		{"on time", map[string][]float64{"a": {0, 10, 20.3, 30.5}}, 35, LeaseSummary{MaxGap: 10300 * time.Millisecond}},
		{"one late", map[string][]float64{"a": {0, 10, 22}, "b": {0, 10}}, 25, LeaseSummary{Late: 1, MaxGap: 12 * time.Second}},
		{"one missed", map[string][]float64{"a": {0, 45, 55}, "b": {0, 10, 20}}, 60, LeaseSummary{Missed: 1, NodesMissed: 1, MaxGap: 45 * time.Second}},
		{"stopped renewing", map[string][]float64{"a": {0, 10}}, 60, LeaseSummary{Missed: 1, NodesMissed: 1, MaxGap: 50 * time.Second}},
		{"a resync repeats a renewTime", map[string][]float64{"a": {0, 10, 10, 5, 20}}, 25, LeaseSummary{MaxGap: 10 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLeases(11*time.Second, 40*time.Second)
			for node, ts := range c.renews {
				for _, s := range ts {
					l.Renewed(node, at(s))
				}
			}
			if got := l.Summary(at(c.now)); got != c.want {
				t.Errorf("Summary = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestLeases_Counts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLeases(11*time.Second, 40*time.Second)
	l.Renewed("a", t0)
	l.Renewed("a", t0.Add(12*time.Second))
	first := l.Counts()
	l.Renewed("a", t0.Add(60*time.Second))
	l.Renewed("b", t0)
	l.Renewed("b", t0.Add(15*time.Second))
	if got, want := l.Counts().Sub(first), (PhaseLeases{Late: 1, Missed: 1}); got != want || first != (PhaseLeases{Late: 1}) {
		t.Errorf("first phase %+v, second %+v; want {Late:1} and %+v", first, got, want)
	}
}

func TestLeases_Nodes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLeases(11*time.Second, 40*time.Second)
	if n := l.Nodes(); n != 0 {
		t.Fatalf("Nodes before any Lease = %d, want 0", n)
	}
	l.Renewed("a", t0)
	l.Renewed("a", t0.Add(10*time.Second))
	l.Renewed("b", t0)
	if n := l.Nodes(); n != 2 {
		t.Errorf("Nodes = %d, want 2 (a renewed twice, b once)", n)
	}
}
