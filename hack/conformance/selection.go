package main

import (
	"fmt"
	"strings"
)

// Selection is which specs a run chose: the suite, the tags its default
// focus selects, and the focus and file filter in effect.
type Selection struct {
	// Suite is e2e (test/e2e's specs of test/e2e/common) or e2e_node
	// (test/e2e_node's).
	Suite string `json:"suite"`
	// Tags is both, node or conformance for the e2e suite: its default
	// focus, [NodeConformance] and [Conformance] or one of them; empty
	// for e2e_node.
	Tags string `json:"tags,omitempty"`
	// Focus is the ginkgo focus in effect; FocusChosen is true when it
	// was given rather than the suite's (and tags') default.
	Focus       string `json:"focus"`
	FocusChosen bool   `json:"focusChosen"`
	// Files is the source file filter in effect (empty: every file);
	// FilesChosen is true when it was given rather than the suite's default.
	Files       string `json:"files"`
	FilesChosen bool   `json:"filesChosen"`
}

// The tags of the e2e suite's default focus.
var tagFocus = map[string]struct{ focus, title string }{
	"both":        {`\[NodeConformance\]|\[Conformance\]`, "[NodeConformance] and [Conformance]"},
	"node":        {`\[NodeConformance\]`, "[NodeConformance]"},
	"conformance": {`\[Conformance\]`, "[Conformance]"},
}

// commonFiles is the e2e suite's default file filter: every
// [NodeConformance] spec is in test/e2e/common, and the [Conformance]
// specs elsewhere need a whole cluster (kube-proxy, a CNI across nodes,
// storage).
const commonFiles = "/test/e2e/common/"

// newSelection resolves a run's selection: an empty focus or files is the
// suite's default (for e2e, by tags; an empty tags is both).
func newSelection(suite, tags, focus, files string) (Selection, error) {
	s := Selection{Suite: suite, Focus: focus, FocusChosen: focus != "", Files: files, FilesChosen: files != ""}
	switch suite {
	case "e2e":
		if tags == "" {
			tags = "both"
		}
		t, ok := tagFocus[tags]
		if !ok {
			return Selection{}, fmt.Errorf("-tags %q: want both, node or conformance", tags)
		}
		s.Tags = tags
		if !s.FocusChosen {
			s.Focus = t.focus
		}
		if !s.FilesChosen {
			s.Files = commonFiles
		}
	case "e2e_node":
		if tags != "" {
			return Selection{}, fmt.Errorf("-tags %q: only the e2e suite has tags", tags)
		}
		if !s.FocusChosen {
			s.Focus = `\[NodeConformance\]`
		}
	default:
		return Selection{}, fmt.Errorf("-suite %q: want e2e or e2e_node", suite)
	}
	return s, nil
}

// Title names the specs run: the suite's directory and the tags its
// default focus selects (test/e2e/common [NodeConformance] and
// [Conformance], test/e2e_node [NodeConformance]), or only the suite when
// the focus was chosen.
func (s Selection) Title() string {
	dir := "test/e2e_node"
	if s.Suite == "e2e" {
		dir = "test/e2e"
		if s.Files == commonFiles {
			dir = "test/e2e/common"
		}
	}
	switch {
	case s.FocusChosen:
		return dir
	case s.Suite == "e2e":
		return dir + " " + tagFocus[s.Tags].title
	default:
		return dir + " [NodeConformance]"
	}
}

// Filter is the title's second line: the focus and the file filter.
func (s Selection) Filter() string {
	files := "every file"
	if s.Files != "" {
		files = fmt.Sprintf("files %q", s.Files)
	}
	return fmt.Sprintf("focus %q, %s", s.Focus, files)
}

// heading is the two lines results open with: the title and the filter.
// A summary written before runs recorded their selection has neither.
func (s *Summary) heading() (title, filter string) {
	if s.Title == "" {
		return "specs (selection not recorded)", ""
	}
	return s.Title, s.Filter
}

// headings is the heading of two runs compared: one when they agree, both
// otherwise.
func headings(w, k *Summary) (title, filter string) {
	wt, wf := w.heading()
	kt, kf := k.heading()
	title, filter = wt, wf
	if kt != wt {
		title = "wasmlet: " + wt + "; kubelet: " + kt
	}
	if kf != wf {
		filter = strings.TrimSpace("wasmlet: " + wf + "; kubelet: " + kf)
	}
	return title, filter
}
