package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSelection_Title(t *testing.T) {
	tests := []struct {
		name                      string
		suite, tags, focus, files string
		wantTitle, wantFilter     string
		wantFocus                 string
	}{
		{name: "e2e, tags both (the default)", suite: "e2e",
			wantTitle: "test/e2e/common [NodeConformance] and [Conformance]", wantFocus: `\[NodeConformance\]|\[Conformance\]`,
			wantFilter: `focus "\\[NodeConformance\\]|\\[Conformance\\]", files "/test/e2e/common/"`},
		{name: "e2e, tags node", suite: "e2e", tags: "node",
			wantTitle: "test/e2e/common [NodeConformance]", wantFocus: `\[NodeConformance\]`,
			wantFilter: `focus "\\[NodeConformance\\]", files "/test/e2e/common/"`},
		{name: "e2e, tags conformance", suite: "e2e", tags: "conformance",
			wantTitle: "test/e2e/common [Conformance]", wantFocus: `\[Conformance\]`,
			wantFilter: `focus "\\[Conformance\\]", files "/test/e2e/common/"`},
		{name: "e2e, focus chosen", suite: "e2e", tags: "conformance", focus: "should get a host IP",
			wantTitle: "test/e2e/common", wantFocus: "should get a host IP",
			wantFilter: `focus "should get a host IP", files "/test/e2e/common/"`},
		{name: "e2e, other files", suite: "e2e", focus: "x", files: "/test/e2e/node/",
			wantTitle: "test/e2e", wantFocus: "x", wantFilter: `focus "x", files "/test/e2e/node/"`},
		{name: "e2e_node", suite: "e2e_node",
			wantTitle: "test/e2e_node [NodeConformance]", wantFocus: `\[NodeConformance\]`,
			wantFilter: `focus "\\[NodeConformance\\]", every file`},
		{name: "e2e_node, its own files", suite: "e2e_node", files: "/test/e2e_node/",
			wantTitle: "test/e2e_node [NodeConformance]", wantFocus: `\[NodeConformance\]`,
			wantFilter: `focus "\\[NodeConformance\\]", files "/test/e2e_node/"`},
		{name: "e2e_node, focus chosen", suite: "e2e_node", focus: "while in preStop", files: "/test/e2e_node/",
			wantTitle: "test/e2e_node", wantFocus: "while in preStop", wantFilter: `focus "while in preStop", files "/test/e2e_node/"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := newSelection(tt.suite, tt.tags, tt.focus, tt.files)
			if err != nil {
				t.Fatal(err)
			}
			if s.Title() != tt.wantTitle || s.Filter() != tt.wantFilter || s.Focus != tt.wantFocus {
				t.Errorf("title %q, filter %q, focus %q; want %q, %q, %q", s.Title(), s.Filter(), s.Focus, tt.wantTitle, tt.wantFilter, tt.wantFocus)
			}
		})
	}
}

func TestNewSelection_errors(t *testing.T) {
	for _, tt := range []struct{ suite, tags, want string }{
		{"e2e", "all", `-tags "all"`},
		{"e2e_node", "node", "only the e2e suite has tags"},
		{"node", "", `-suite "node"`},
	} {
		if _, err := newSelection(tt.suite, tt.tags, "", ""); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("newSelection(%q, %q): %v, want an error with %q", tt.suite, tt.tags, err, tt.want)
		}
	}
}

// The results open with the title and the filter: table.txt, junit.xml's
// suite name and properties, summary.json, and compare.txt.
func TestWriteResults_title(t *testing.T) {
	sel, err := newSelection("e2e", "conformance", "", "")
	if err != nil {
		t.Fatal(err)
	}
	summary := func(node string) *Summary {
		return &Summary{Node: node, Title: sel.Title(), Filter: sel.Filter(), Selection: sel, Specs: []Spec{{Name: "a", File: "f.go", State: "passed"}}}
	}
	dir := t.TempDir()
	if err := writeResults(dir, summary("wasmlet")); err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(filepath.Join(dir, "table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "test/e2e/common [Conformance]\n" + `focus "\\[Conformance\\]", files "/test/e2e/common/"` + "\n\nwasmlet: 1 passed"; !strings.HasPrefix(string(table), want) {
		t.Errorf("table.txt:\n%s\nwant it to open with:\n%s", table, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var j junitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Suites) != 1 || j.Suites[0].Name != "test/e2e/common [Conformance] on wasmlet" || len(j.Suites[0].Properties) != 3 || j.Suites[0].Properties[1].Value != `\[Conformance\]` {
		t.Errorf("junit suite = %+v", j.Suites)
	}
	got, err := readSummary(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != sel.Title() || got.Filter != sel.Filter() || got.Selection != sel {
		t.Errorf("summary.json: title %q, filter %q, selection %+v", got.Title, got.Filter, got.Selection)
	}

	var out bytes.Buffer
	writeComparison(&out, summary("wasmlet"), summary("kubelet"))
	if want := "test/e2e/common [Conformance], spec by spec: wasmlet 1 passed / 0 failed / 0 skipped; kubelet 1 / 0 / 0\n" + sel.Filter() + "\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("compare.txt:\n%s\nwant it to open with:\n%s", out.String(), want)
	}
	// Runs of two selections: both titles.
	other := summary("kubelet")
	other.Title = "test/e2e_node [NodeConformance]"
	out.Reset()
	writeComparison(&out, summary("wasmlet"), other)
	if want := "wasmlet: test/e2e/common [Conformance]; kubelet: test/e2e_node [NodeConformance], spec by spec"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("compare.txt of two selections:\n%s", out.String())
	}
}
