//go:build !wasip1

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/abi"
	"github.com/wasmlet/wasmlet/host/internal/admission"
	"github.com/wasmlet/wasmlet/host/internal/pluginhost"
)

// BenchmarkChainParts splits the wasm chain's cost per admission of the
// 4 KB pod, each figure a median of wall time over b.N rounds (the thread's
// CPU time is counted in ticks here, too coarse for one call):
//
//   - encode: the host encoding the v1.Pod to JSON (once per admission);
//
//   - alone/<policy>: one policy called on its own, round after round (what
//     a single-plugin benchmark sees);
//
//   - interleaved: the four policies called one after the other through
//     pluginhost.Plugin.Admit, each call timed (<policy>-p50-ns), and the round
//     (round-p50-ns);
//
//   - chain: admission.Chain.Admit, the agent's path;
//
//   - same-module: four copies of no-privileged loaded as four plugins
//     and called in turn like the interleaved four (each copy-p50-ns):
//     the same work and four instances' memories, but one module's code
//     where the chain has four (see RATIONALE.md, "What a chain's time is
//     made of").
//
//     go test -run '^$' -bench ChainParts -benchtime 2000x ./host/internal/extension/chainbench/
func BenchmarkChainParts(b *testing.B) {
	pod, _ := pod4k(b)
	chain, m := wasmChain(b, pluginhost.DeadlineAuto, false)
	ps := m.Admitters()
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	req := &abi.AdmitRequest{Pod: raw, PodsOnNode: []json.RawMessage{}}
	ctx := context.Background()
	admit := func(p *pluginhost.Plugin) {
		if r, err := p.Admit(ctx, req); err != nil || !r.Allowed {
			b.Fatalf("%s: %+v %v", p.Name(), r, err)
		}
	}
	b.Run("encode", func(b *testing.B) {
		medians(b, []string{"encode"}, func(lap func(int)) {
			if _, err := json.Marshal(pod); err != nil {
				b.Fatal(err)
			}
			lap(0)
		})
	})
	for _, p := range ps {
		b.Run("alone/"+p.Name(), func(b *testing.B) {
			medians(b, []string{"call"}, func(lap func(int)) {
				admit(p)
				lap(0)
			})
		})
	}
	names := []string{}
	for _, p := range ps {
		names = append(names, p.Name())
	}
	b.Run("interleaved", func(b *testing.B) {
		medians(b, names, func(lap func(int)) {
			for i, p := range ps {
				admit(p)
				lap(i)
			}
		})
	})
	var copies []policy
	var copyNames []string
	for i := range 4 {
		name := fmt.Sprintf("no-privileged-%d", i)
		copies = append(copies, policy{name: name, dir: "no-privileged", order: 10 + i, config: policies[0].config})
		copyNames = append(copyNames, name)
	}
	same := loadPolicies(b, copies, pluginhost.DeadlineAuto).Admitters()
	b.Run("same-module", func(b *testing.B) {
		medians(b, copyNames, func(lap func(int)) {
			for i, p := range same {
				admit(p)
				lap(i)
			}
		})
	})
	attrs := admission.Attributes{Pod: pod}
	b.Run("chain", func(b *testing.B) {
		medians(b, []string{"chain"}, func(lap func(int)) {
			if r := chain.Admit(ctx, attrs); !r.Admit {
				b.Fatal(r)
			}
			lap(0)
		})
	})
}

// medians runs round b.N times; round calls lap(i) after its i-th part,
// and the medians of each part's wall time and of the whole round are
// reported.
func medians(b *testing.B, parts []string, round func(lap func(int))) {
	var t0 time.Time
	lap := func(int) {}
	round(lap) // warm up
	laps := make([][]time.Duration, len(parts))
	rounds := make([]time.Duration, 0, b.N)
	lap = func(i int) {
		t := time.Now()
		laps[i] = append(laps[i], t.Sub(t0))
		t0 = t
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		start := time.Now()
		t0 = start
		round(lap)
		rounds = append(rounds, t0.Sub(start))
	}
	b.StopTimer()
	for i, name := range parts {
		b.ReportMetric(float64(median(laps[i])), name+"-p50-ns")
	}
	if len(parts) > 1 {
		b.ReportMetric(float64(median(rounds)), "round-p50-ns")
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
