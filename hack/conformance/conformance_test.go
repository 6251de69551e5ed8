package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// report is a ginkgo v2 JSON report as e2e.test writes it (trimmed): a
// BeforeSuite node, two It specs, one of them failed.
const report = `[{"SuitePath":"/x","SuiteDescription":"Kubernetes e2e suite","SpecReports":[
 {"ContainerHierarchyTexts":null,"LeafNodeType":"SynchronizedBeforeSuite","LeafNodeText":"","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-node] Pods"],"LeafNodeType":"It","LeafNodeText":"should get a host IP [NodeConformance] [Conformance]",
  "LeafNodeLocation":{"FileName":"/root/go/pkg/mod/k8s.io/kubernetes@v1.36.3/test/e2e/common/node/pods.go","LineNumber":204},
  "State":"passed","RunTime":12500000000,"Failure":{"Message":""}},
 {"ContainerHierarchyTexts":["[sig-storage] ConfigMap","with (x)"],"LeafNodeType":"It","LeafNodeText":"should be consumable [NodeConformance]",
  "LeafNodeLocation":{"FileName":"/m/k8s.io/kubernetes@v1.36.3/test/e2e/common/storage/configmap_volume.go","LineNumber":47},
  "State":"failed","RunTime":3000000000,"Failure":{"Message":"\n  pod never started: volume kube-api-access-x refused\n"}}
]}]`

func writeReport(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadSpecs(t *testing.T) {
	suite, specs, err := readSpecs(writeReport(t))
	if err != nil {
		t.Fatal(err)
	}
	if suite != "Kubernetes e2e suite" {
		t.Errorf("suite = %q", suite)
	}
	if len(specs) != 2 {
		t.Fatalf("read %d specs, want the 2 It nodes", len(specs))
	}
	if got, want := specs[1].fullText(), "[sig-storage] ConfigMap with (x) should be consumable [NodeConformance]"; got != want {
		t.Errorf("fullText = %q, want %q", got, want)
	}
	if specs[0].RunTime.Seconds() != 12.5 || specs[1].State != "failed" {
		t.Errorf("spec 0 run time %v, spec 1 state %q", specs[0].RunTime, specs[1].State)
	}
	// The focus of a spec matches what ginkgo matches for it (the suite's
	// description, a space, the spec's full text) and nothing else, though
	// the text holds regexp metacharacters.
	re := regexp.MustCompile(focusOf(suite, []ginkgoSpec{specs[1]}))
	for text, want := range map[string]bool{
		suite + " " + specs[1].fullText():           true,
		suite + " " + specs[0].fullText():           false,
		suite + " " + specs[1].fullText() + " more": false,
		suite + " X " + specs[1].fullText():         false,
	} {
		if re.MatchString(text) != want {
			t.Errorf("focus %q on %q: match %v, want %v", re, text, !want, want)
		}
	}
}

func TestWriteResults(t *testing.T) {
	s := &Summary{Node: "wasmlet", Specs: []Spec{
		{Name: "a", File: "common/node/pods.go", State: "passed", Seconds: 1},
		{Name: "b", File: "common/node/pods.go", State: "timedout", Seconds: 900, Failure: "limit"},
		{Name: "c", File: "common/storage/empty_dir.go", State: "failed", Failure: "boom\nmore"},
		{Name: "d", File: "common/storage/empty_dir.go", State: "skipped"},
	}}
	dir := t.TempDir()
	if err := writeResults(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := readSummary(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Passed != 1 || got.Failed != 2 || got.Skipped != 1 || len(got.Specs) != 4 || got.Specs[1].State != "timedout" {
		t.Errorf("summary = %+v", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var j junitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	if len(j.Suites) != 1 || j.Suites[0].Tests != 4 || j.Suites[0].Failures != 2 || j.Suites[0].Skipped != 1 ||
		j.Suites[0].Cases[2].Failure == nil || j.Suites[0].Cases[2].Failure.Message != "boom\nmore" || j.Suites[0].Cases[3].Skipped == nil {
		t.Errorf("junit = %+v", j)
	}
	table, err := os.ReadFile(filepath.Join(dir, "table.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wasmlet: 1 passed, 2 failed, 1 skipped of 4", "common/node/pods.go", "- [failed] c (common/storage/empty_dir.go)\n    boom\n"} {
		if !strings.Contains(string(table), want) {
			t.Errorf("table.txt lacks %q:\n%s", want, table)
		}
	}
}

func TestCompare(t *testing.T) {
	w := &Summary{Node: "wasmlet", Specs: []Spec{
		{Name: "both", State: "passed"}, {Name: "todo", State: "failed"}, {Name: "ours", State: "passed"},
		{Name: "none", State: "timedout"}, {Name: "w-only", State: "passed"},
	}}
	k := &Summary{Node: "kubelet", Specs: []Spec{
		{Name: "both", State: "passed"}, {Name: "todo", State: "passed"}, {Name: "ours", State: "failed"},
		{Name: "none", State: "failed"}, {Name: "k-only", State: "passed"},
	}}
	c := compare(w, k)
	names := func(ss []Spec) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	if names(c.both) != "both" || names(c.kubeletOnly) != "todo" || names(c.wasmletOnly) != "ours" || names(c.neither) != "none" || len(c.onlyInOne) != 2 {
		t.Errorf("compare = both %q kubelet-only %q wasmlet-only %q neither %q in one %v",
			names(c.both), names(c.kubeletOnly), names(c.wasmletOnly), names(c.neither), c.onlyInOne)
	}
	var out bytes.Buffer
	writeComparison(&out, w, k)
	if !strings.Contains(out.String(), "passed by the kubelet only (wasmlet's to-do list): 1\n- todo") {
		t.Errorf("comparison:\n%s", out.String())
	}
}

// The dry run's specs are kept when their file matches -files; a fake
// suite binary writes the report where it is told to.
func TestList_files(t *testing.T) {
	dir := t.TempDir()
	src := writeReport(t)
	fake := filepath.Join(dir, "fake.test")
	script := "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --ginkgo.json-report ] && cp " + src + " \"$2\"; shift; done\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		files string
		want  []string
	}{
		{"", []string{"common/node/pods.go", "common/storage/configmap_volume.go"}},
		{"/test/e2e/common/storage/", []string{"common/storage/configmap_volume.go"}},
		{"/test/e2e_node/", nil},
	} {
		cfg := runConfig{E2E: fake, Out: t.TempDir()}
		if tc.files != "" {
			cfg.Files = regexp.MustCompile(tc.files)
		}
		_, specs, err := list(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range specs {
			got = append(got, shortFile(s.LeafNodeLocation.FileName))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("files %q: listed %v, want %v", tc.files, got, tc.want)
		}
	}
}

func TestShortFile(t *testing.T) {
	for in, want := range map[string]string{
		"/m/k8s.io/kubernetes@v1.36.3/test/e2e/common/node/pods.go":     "common/node/pods.go",
		"/m/k8s.io/kubernetes@v1.36.3/test/e2e_node/mirror_pod_test.go": "e2e_node/mirror_pod_test.go",
		"/elsewhere/x_test.go": "x_test.go",
	} {
		if got := shortFile(in); got != want {
			t.Errorf("shortFile(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnits: the specs of an Ordered container (found in the source, even
// when its decorators span lines) run in one process, in listing order;
// the others alone; a focus for a unit matches its specs and no other.
func TestUnits(t *testing.T) {
	root := t.TempDir()
	src := `package x
var _ = ginkgo.Describe("outer", func() {
	ginkgo.When("ordered", ginkgo.Ordered, func() {
	})
	ginkgo.When("plain", func() {
	})
	ginkgo.Context("split",
		ginkgo.Ordered, func() {
	})
})
`
	if err := os.MkdirAll(filepath.Join(root, "k8s.io/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "k8s.io/x/a_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	loc := func(line int) codeLocation { return codeLocation{FileName: "k8s.io/x/a_test.go", LineNumber: line} }
	spec := func(leaf string, lines ...int) ginkgoSpec {
		s := ginkgoSpec{LeafNodeText: leaf, ContainerHierarchyTexts: []string{"outer"}, ContainerHierarchyLocations: []codeLocation{loc(2)}}
		for _, l := range lines {
			s.ContainerHierarchyTexts = append(s.ContainerHierarchyTexts, fmt.Sprint("c", l))
			s.ContainerHierarchyLocations = append(s.ContainerHierarchyLocations, loc(l))
		}
		return s
	}
	specs := []ginkgoSpec{spec("a1", 3), spec("p1", 5), spec("a2", 3), spec("s1", 7), spec("alone"), spec("s2", 7), spec("p2", 5)}
	got, err := units(specs, (&orderedSource{root: root}).ordered)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[[0 2] [1] [3 5] [4] [6]]"; fmt.Sprint(got) != want {
		t.Errorf("units = %v, want %v", got, want)
	}
	re := regexp.MustCompile(focusOf("S", []ginkgoSpec{specs[0], specs[2]}))
	for i, s := range specs {
		if want := i == 0 || i == 2; re.MatchString("S "+s.fullText()) != want {
			t.Errorf("unit focus on %q: match %v, want %v", s.fullText(), !want, want)
		}
	}
	if _, err := units([]ginkgoSpec{{ContainerHierarchyLocations: []codeLocation{{FileName: "k8s.io/missing.go", LineNumber: 1}}}}, (&orderedSource{root: root}).ordered); err == nil {
		t.Error("a container whose source cannot be read: no error")
	}
}

// The units start longest first: known run times first, a [Slow] spec
// without one as a long one, the rest in the listing's order; a merge
// keeps the longest time and ignores what did not run.
func TestLongestFirst(t *testing.T) {
	spec := func(text string) ginkgoSpec { return ginkgoSpec{LeafNodeText: text} }
	specs := []ginkgoSpec{spec("a"), spec("b [Slow]"), spec("c"), spec("d"), spec("e")}
	units := [][]int{{0}, {1}, {2, 3}, {4}}
	d := Durations{"a": 5, "c": 400, "d": 1}
	got := longestFirst(units, specs, d)
	want := [][]int{{2, 3}, {1}, {4}, {0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}

	d.merge([]Spec{{Name: "a", State: "passed", Seconds: 9}, {Name: "c", State: "failed", Seconds: 10},
		{Name: "e", State: "interrupted", Seconds: 3}, {Name: "f", State: "skipped"}})
	if d["a"] != 9 || d["c"] != 400 {
		t.Errorf("merged a=%v c=%v, want the longer times 9 and 400", d["a"], d["c"])
	}
	if _, ok := d["e"]; ok {
		t.Errorf("an interrupted spec's time was kept: %v", d)
	}
	path := filepath.Join(t.TempDir(), "d", "durations.json")
	if err := d.write(path); err != nil {
		t.Fatal(err)
	}
	back, err := readDurations(path)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(d) {
		t.Errorf("read back %v (%v), want %v", back, err, d)
	}
	if none, err := readDurations(filepath.Join(t.TempDir(), "missing")); err != nil || len(none) != 0 {
		t.Errorf("a missing file: %v, %v; want none, no error", none, err)
	}
}

// An empty container text (ginkgo.Context("")) is not part of the text
// ginkgo focuses on, so it is not part of the spec's name either: the
// focus built from the name matches the spec.
func TestFullText_emptyContainer(t *testing.T) {
	s := ginkgoSpec{ContainerHierarchyTexts: []string{"[sig-node] Pod SIGKILL [LinuxOnly]", ""}, LeafNodeText: "The containers terminated forcefully by Sigkill"}
	want := "[sig-node] Pod SIGKILL [LinuxOnly] The containers terminated forcefully by Sigkill"
	if got := s.fullText(); got != want {
		t.Fatalf("fullText = %q, want %q", got, want)
	}
	// ginkgo's text: the suite's description, a space, the non-empty
	// texts joined by single spaces.
	if re := regexp.MustCompile(focusOf("Kubernetes e2e suite", []ginkgoSpec{s})); !re.MatchString("Kubernetes e2e suite " + want) {
		t.Errorf("focus %q does not match the text ginkgo matches", re)
	}
}

func TestSpecResult(t *testing.T) {
	spec := func(text, state, msg string) ginkgoSpec {
		g := ginkgoSpec{ContainerHierarchyTexts: []string{"[sig-node] X"}, LeafNodeText: text, State: state}
		g.Failure.Message = msg
		return g
	}
	other := spec("other", "skipped", "")
	for _, tc := range []struct {
		name      string
		got       []ginkgoSpec
		n         int
		state     string
		harnessed bool // a harness failure
	}{
		{"passed", []ginkgoSpec{spec("a", "passed", ""), other}, 1, "passed", false},
		{"failed", []ginkgoSpec{spec("a", "failed", "boom"), other}, 1, "failed", false},
		{"skipped by itself, with its reason", []ginkgoSpec{spec("a", "skipped", "runtime does not support it"), other}, 1, "skipped", false},
		{"left out by the focus", []ginkgoSpec{spec("a", "skipped", ""), other}, 1, "failed", true},
		{"missing from the report", []ginkgoSpec{other}, 1, "failed", true},
		{"twice in the report", []ginkgoSpec{spec("a", "passed", ""), spec("a", "passed", "")}, 1, "failed", true},
		{"the focus took another spec too", []ginkgoSpec{spec("a", "passed", ""), spec("b", "passed", "")}, 1, "failed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, failure, _ := specResult("[sig-node] X a", tc.got, tc.n)
			if state != tc.state || strings.HasPrefix(failure, "harness:") != tc.harnessed {
				t.Errorf("state %q, failure %q; want state %q, harness failure %v", state, failure, tc.state, tc.harnessed)
			}
		})
	}
}
