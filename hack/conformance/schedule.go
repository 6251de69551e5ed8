package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Durations are the seconds each spec (by full text) took in earlier runs,
// the longest seen on any node: the runner starts the longest units first,
// so that with many specs at once the run does not end waiting for one long
// spec that started last.
type Durations map[string]float64

// The estimate of a spec no earlier run timed: a [Slow] spec is the
// suite's long kind (minutes), any other a typical one.
const (
	slowEstimate    = 300.0
	defaultEstimate = 20.0
)

// readDurations reads path; a missing file is none.
func readDurations(path string) (Durations, error) {
	d := Durations{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// merge records the run's specs that finished (passed or failed: an
// interrupted or skipped one says nothing about its length), keeping the
// longer of two times.
func (d Durations) merge(specs []Spec) {
	for _, s := range specs {
		if s.State == "skipped" || s.State == "interrupted" || s.Seconds <= 0 {
			continue
		}
		if s.Seconds > d[s.Name] {
			d[s.Name] = s.Seconds
		}
	}
}

// write saves d at path, atomically.
func (d Durations) write(path string) error {
	data, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// estimate is the expected seconds of one spec.
func (d Durations) estimate(s ginkgoSpec) float64 {
	if v, ok := d[s.fullText()]; ok {
		return v
	}
	if strings.Contains(s.fullText(), "[Slow]") {
		return slowEstimate
	}
	return defaultEstimate
}

// longestFirst orders the units by their expected run time, longest first
// (equal ones keep the listing's order): the longest-processing-time rule,
// which keeps a parallel run's end close to its busiest worker's.
func longestFirst(units [][]int, specs []ginkgoSpec, d Durations) [][]int {
	est := make([]float64, len(units))
	for i, u := range units {
		for _, k := range u {
			est[i] += d.estimate(specs[k])
		}
	}
	idx := make([]int, len(units))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return est[idx[a]] > est[idx[b]] })
	out := make([][]int, len(units))
	for i, k := range idx {
		out[i] = units[k]
	}
	return out
}
