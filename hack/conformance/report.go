package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ginkgoReport is the part of a ginkgo v2 JSON report (--ginkgo.json-report)
// the harness reads: one entry per suite run, each with its specs.
type ginkgoReport struct {
	SuiteDescription string
	SpecReports      []ginkgoSpec
}

// ginkgoSpec is one spec of a ginkgo report.
type ginkgoSpec struct {
	ContainerHierarchyTexts     []string
	ContainerHierarchyLocations []codeLocation
	LeafNodeType                string
	LeafNodeText                string
	LeafNodeLocation            struct{ FileName string }
	State                       string
	RunTime                     time.Duration
	Failure                     struct{ Message string }
}

// fullText is the text ginkgo's --ginkgo.focus matches: the container texts
// and the leaf's, joined by spaces, an empty container text (a
// ginkgo.Context("")) left out as ginkgo leaves it out.
func (s ginkgoSpec) fullText() string {
	var texts []string
	for _, t := range append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText) {
		if t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, " ")
}

// readSpecs reads a ginkgo JSON report and returns its suite's description
// (which ginkgo's focus matches in front of a spec's text) and its It specs.
func readSpecs(path string) (string, []ginkgoSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(b, &reports); err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	var (
		suite string
		out   []ginkgoSpec
	)
	for _, r := range reports {
		suite = r.SuiteDescription
		for _, s := range r.SpecReports {
			if s.LeafNodeType == "It" {
				out = append(out, s)
			}
		}
	}
	return suite, out, nil
}

// Spec is one spec's result in summary.json.
type Spec struct {
	// Name is the spec's full text.
	Name string `json:"name"`
	// File is the spec's source file under test/e2e.
	File string `json:"file"`
	// State is passed, failed, skipped, or ginkgo's other end states
	// (timedout, panicked, interrupted, aborted) for a spec that did not pass.
	State string `json:"state"`
	// Seconds is the spec's run time.
	Seconds float64 `json:"seconds"`
	// Failure is the failure message, empty unless the spec failed.
	Failure string `json:"failure,omitempty"`
}

// Summary is summary.json: one node's run.
type Summary struct {
	// Node is wasmlet or kubelet.
	Node string `json:"node"`
	// Title names the specs run and Filter gives the focus and file
	// filter (Selection.Title, Selection.Filter); Selection is what
	// chose them.
	Title     string    `json:"title"`
	Filter    string    `json:"filter"`
	Selection Selection `json:"selection"`
	// Passed, Failed and Skipped count the specs by outcome.
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// Specs are every selected spec, in run order.
	Specs []Spec `json:"specs"`
}

// passed reports whether a state counts as a pass.
func passed(state string) bool { return state == "passed" }

// count fills the totals from the specs.
func (s *Summary) count() {
	s.Passed, s.Failed, s.Skipped = 0, 0, 0
	for _, sp := range s.Specs {
		switch {
		case passed(sp.State):
			s.Passed++
		case sp.State == "skipped" || sp.State == "pending":
			s.Skipped++
		default:
			s.Failed++
		}
	}
}

// shortFile is a spec file relative to test/e2e (common/node/pods.go), or
// to test for the node suite's own (e2e_node/mirror_pod_test.go).
func shortFile(f string) string {
	if i := strings.Index(f, "test/e2e/"); i >= 0 {
		return f[i+len("test/e2e/"):]
	}
	if i := strings.Index(f, "test/e2e_node/"); i >= 0 {
		return f[i+len("test/"):]
	}
	return filepath.Base(f)
}

// fileRow is one line of the table by file.
type fileRow struct {
	file                    string
	passed, failed, skipped int
}

// byFile counts the specs per file, files sorted by name.
func byFile(specs []Spec) []fileRow {
	rows := map[string]*fileRow{}
	for _, sp := range specs {
		r := rows[sp.File]
		if r == nil {
			r = &fileRow{file: sp.File}
			rows[sp.File] = r
		}
		switch {
		case passed(sp.State):
			r.passed++
		case sp.State == "skipped" || sp.State == "pending":
			r.skipped++
		default:
			r.failed++
		}
	}
	out := make([]fileRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].file < out[j].file })
	return out
}

// writeTable writes the readable table by file.
func writeTable(w io.Writer, s *Summary) {
	title, filter := s.heading()
	fmt.Fprintf(w, "%s\n%s\n\n", title, filter)
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped of %d\n\n", s.Node, s.Passed, s.Failed, s.Skipped, len(s.Specs))
	fmt.Fprintf(w, "%-48s %6s %6s %7s\n", "file", "passed", "failed", "skipped")
	for _, r := range byFile(s.Specs) {
		fmt.Fprintf(w, "%-48s %6d %6d %7d\n", r.file, r.passed, r.failed, r.skipped)
	}
	var failed []Spec
	for _, sp := range s.Specs {
		if !passed(sp.State) && sp.State != "skipped" && sp.State != "pending" {
			failed = append(failed, sp)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nnot passed:\n")
		for _, sp := range failed {
			fmt.Fprintf(w, "- [%s] %s (%s)\n    %s\n", sp.State, sp.Name, sp.File, firstLine(sp.Failure))
		}
	}
}

// firstLine is s's first non-empty line, at most 200 bytes.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200] + "…"
			}
			return l
		}
	}
	return ""
}

// junit types: the subset of the JUnit XML schema CI tools read.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       float64         `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *struct{}     `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Type    string `xml:"type,attr"`
	Message string `xml:",chardata"`
}

// writeJUnit writes the run as one JUnit test suite named for the specs
// and the node, its focus and file filter as properties.
func writeJUnit(w io.Writer, s *Summary) error {
	title, filter := s.heading()
	suite := junitSuite{Name: title + " on " + s.Node, Tests: len(s.Specs), Failures: s.Failed, Skipped: s.Skipped,
		Properties: []junitProperty{{Name: "filter", Value: filter}, {Name: "focus", Value: s.Selection.Focus}, {Name: "files", Value: s.Selection.Files}}}
	for _, sp := range s.Specs {
		c := junitCase{Name: sp.Name, ClassName: sp.File, Time: sp.Seconds}
		suite.Time += sp.Seconds
		switch {
		case passed(sp.State):
		case sp.State == "skipped" || sp.State == "pending":
			c.Skipped = &struct{}{}
		default:
			c.Failure = &junitFailure{Type: sp.State, Message: sp.Failure}
		}
		suite.Cases = append(suite.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{suite}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// writeResults writes junit.xml, summary.json and table.txt into dir.
func writeResults(dir string, s *Summary) error {
	s.count()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"junit.xml": func(w io.Writer) error { return writeJUnit(w, s) },
		"table.txt": func(w io.Writer) error { writeTable(w, s); return nil },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		werr := write(f)
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("%s: %w", name, werr)
		}
	}
	return nil
}

// readSummary reads a summary.json.
func readSummary(path string) (*Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}
