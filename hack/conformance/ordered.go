package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// codeLocation is where a ginkgo node is declared, as the report gives it:
// a path relative to the module cache (the suites build with -trimpath).
type codeLocation struct {
	FileName   string
	LineNumber int
}

// orderedSource tells whether a container node is declared Ordered by
// reading its declaration in the suite's source: ginkgo's dry-run report
// does not carry the Ordered decorator, and a spec of an Ordered container
// cannot run alone (a first spec creates a pod, later ones inspect it).
type orderedSource struct {
	// root is the directory the report's paths are relative to (the Go
	// module cache the suite was built from).
	root  string
	files map[string][]string
}

// ordered reports whether the container declared at loc carries the
// ginkgo.Ordered decorator: its call, from the declaration's line to the
// body's func(, names Ordered.
func (o *orderedSource) ordered(loc codeLocation) (bool, error) {
	lines, ok := o.files[loc.FileName]
	if !ok {
		path := loc.FileName
		if !filepath.IsAbs(path) {
			path = filepath.Join(o.root, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return false, fmt.Errorf("reading the source of a container to find Ordered ones (-source): %w", err)
		}
		lines = strings.Split(string(b), "\n")
		if o.files == nil {
			o.files = map[string][]string{}
		}
		o.files[loc.FileName] = lines
	}
	if loc.LineNumber < 1 || loc.LineNumber > len(lines) {
		return false, fmt.Errorf("%s has no line %d", loc.FileName, loc.LineNumber)
	}
	var decl strings.Builder
	for i := loc.LineNumber - 1; i < len(lines) && i < loc.LineNumber+5; i++ {
		l := lines[i]
		if j := strings.Index(l, "func("); j >= 0 {
			decl.WriteString(l[:j])
			break
		}
		decl.WriteString(l)
	}
	return strings.Contains(decl.String(), "Ordered"), nil
}

// units groups the specs into what one e2e.test process runs, in listing
// order: a spec alone, or every spec of one Ordered container (the
// outermost, as ginkgo orders the whole subtree).
func units(specs []ginkgoSpec, isOrdered func(codeLocation) (bool, error)) ([][]int, error) {
	var out [][]int
	byContainer := map[codeLocation]int{}
	for i, s := range specs {
		key, found := codeLocation{}, false
		for _, loc := range s.ContainerHierarchyLocations {
			o, err := isOrdered(loc)
			if err != nil {
				return nil, fmt.Errorf("spec %q: %w", s.fullText(), err)
			}
			if o {
				key, found = loc, true
				break
			}
		}
		if !found {
			out = append(out, []int{i})
			continue
		}
		if u, ok := byContainer[key]; ok {
			out[u] = append(out[u], i)
			continue
		}
		byContainer[key] = len(out)
		out = append(out, []int{i})
	}
	return out, nil
}
