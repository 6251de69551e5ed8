package main

import (
	"fmt"
	"io"
	"sort"
)

// comparison classifies the specs two runs share by who passed them.
type comparison struct {
	both, kubeletOnly, wasmletOnly, neither []Spec // wasmlet's Spec, kubelet's state in bothStates
	onlyInOne                               []string
}

// compare puts every spec of the wasmlet run in one class by its result
// there and in the kubelet run; specs in one run only are listed apart.
func compare(w, k *Summary) comparison {
	var c comparison
	ks := map[string]Spec{}
	for _, sp := range k.Specs {
		ks[sp.Name] = sp
	}
	seen := map[string]bool{}
	for _, sp := range w.Specs {
		seen[sp.Name] = true
		kp, ok := ks[sp.Name]
		if !ok {
			c.onlyInOne = append(c.onlyInOne, "wasmlet only ran: "+sp.Name)
			continue
		}
		switch wp, kpp := passed(sp.State), passed(kp.State); {
		case wp && kpp:
			c.both = append(c.both, sp)
		case kpp:
			c.kubeletOnly = append(c.kubeletOnly, sp)
		case wp:
			c.wasmletOnly = append(c.wasmletOnly, sp)
		default:
			c.neither = append(c.neither, sp)
		}
	}
	for _, sp := range k.Specs {
		if !seen[sp.Name] {
			c.onlyInOne = append(c.onlyInOne, "kubelet only ran: "+sp.Name)
		}
	}
	return c
}

// writeComparison prints both runs side by side: totals, a table by file
// and the specs of each class (the kubelet-only list is wasmlet's to-do list).
func writeComparison(out io.Writer, w, k *Summary) {
	w.count()
	k.count()
	c := compare(w, k)
	title, filter := headings(w, k)
	fmt.Fprintf(out, "%s, spec by spec: wasmlet %d passed / %d failed / %d skipped; kubelet %d / %d / %d\n%s\n\n",
		title, w.Passed, w.Failed, w.Skipped, k.Passed, k.Failed, k.Skipped, filter)
	type cols struct{ wp, wn, kp, kn int }
	files := map[string]*cols{}
	add := func(s *Summary, isW bool) {
		for _, sp := range s.Specs {
			c := files[sp.File]
			if c == nil {
				c = &cols{}
				files[sp.File] = c
			}
			switch {
			case isW && passed(sp.State):
				c.wp++
			case isW:
				c.wn++
			case passed(sp.State):
				c.kp++
			default:
				c.kn++
			}
		}
	}
	add(w, true)
	add(k, false)
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	fmt.Fprintf(out, "%-48s %15s %15s\n", "file", "wasmlet pass/not", "kubelet pass/not")
	for _, f := range names {
		c := files[f]
		fmt.Fprintf(out, "%-48s %9d/%-5d %9d/%-5d\n", f, c.wp, c.wn, c.kp, c.kn)
	}
	fmt.Fprintf(out, "\npassed by both: %d\n", len(c.both))
	for _, class := range []struct {
		title string
		specs []Spec
	}{
		{"passed by the kubelet only (wasmlet's to-do list)", c.kubeletOnly},
		{"passed by wasmlet only", c.wasmletOnly},
		{"passed by neither", c.neither},
	} {
		fmt.Fprintf(out, "\n%s: %d\n", class.title, len(class.specs))
		for _, sp := range class.specs {
			fmt.Fprintf(out, "- %s (%s)\n    wasmlet: [%s] %s\n", sp.Name, sp.File, sp.State, firstLine(sp.Failure))
		}
	}
	if len(c.onlyInOne) > 0 {
		fmt.Fprintf(out, "\nin one run only: %d\n", len(c.onlyInOne))
		for _, s := range c.onlyInOne {
			fmt.Fprintf(out, "- %s\n", s)
		}
	}
}
