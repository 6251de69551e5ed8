package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Known is a documented difference: field paths matching Path (a regular
// expression over "<kind> <pod>[/<container>] <field.path>") differ for
// Reason.
type Known struct {
	Path   *regexp.Regexp
	Reason string
}

// readKnown reads "REGEXP<TAB>REASON" lines; '#' starts a comment.
func readKnown(path string) ([]Known, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Known
	for i, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		re, reason, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want REGEXP<TAB>REASON", path, i+1)
		}
		r, err := regexp.Compile(re)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, Known{r, strings.TrimSpace(reason)})
	}
	return out, nil
}

// Agent is one agent's recording and what its values are normalized by.
type Agent struct {
	// Name labels the agent's values in the report.
	Name string
	// Replace maps agent-specific strings (its root and log directories)
	// to placeholders before comparing.
	Replace map[string]string
}

// terminationLog matches the random name of a termination-log file.
var terminationLog = regexp.MustCompile(`/containers/([^/]+)/[0-9a-f]{8}$`)

// flat is one request flattened to dotted paths.
type flat map[string]string

// load reads a recording into flattened requests by key ("sandbox <pod>"
// or "container <pod>/<name>"), the first request of each key only (an
// agent's first attempt).
func load(r io.Reader, a Agent) (map[string]flat, error) {
	out := map[string]flat{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(rec.Request, &m); err != nil {
			return nil, err
		}
		sortEnvs(m)
		f := flat{}
		flatten("", m, f)
		var key string
		switch {
		case strings.HasSuffix(rec.Method, "/RunPodSandbox"):
			key = "sandbox " + f["config.metadata.name"]
		case strings.HasSuffix(rec.Method, "/CreateContainer"):
			key = "container " + f["sandboxConfig.metadata.name"] + "/" + f["config.metadata.name"]
		default:
			continue
		}
		if _, seen := out[key]; seen {
			continue
		}
		uid := f["config.metadata.uid"]
		if uid == "" {
			uid = f["sandboxConfig.metadata.uid"]
		}
		for k, v := range f {
			if strings.HasPrefix(k, "sandboxConfig.") && key[0] == 'c' {
				delete(f, k) // the sandbox's config is compared once, as its own
				continue
			}
			if uid != "" {
				v = strings.ReplaceAll(v, uid, "<uid>")
			}
			for from, to := range a.Replace {
				if from != "" {
					v = strings.ReplaceAll(v, from, to)
				}
			}
			// Each agent names a container's termination-log file with
			// 8 random hex digits.
			v = terminationLog.ReplaceAllString(v, "/containers/$1/<random>")
			f[k] = v
		}
		delete(f, "podSandboxId")
		out[key] = f
	}
	return out, sc.Err()
}

// flatten writes v's leaves under prefix; list elements get their index,
// map keys are kept as they are (annotation names contain dots).
func flatten(prefix string, v any, out flat) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			flatten(join(k), x, out)
		}
	case []any:
		for i, x := range t {
			flatten(join(fmt.Sprint(i)), x, out)
		}
	case string:
		out[prefix] = t
	default:
		b, _ := json.Marshal(t)
		out[prefix] = string(b)
	}
}

// Difference is one field that differs.
type Difference struct {
	Key, Field, A, B string
	// Known is the documented reason, empty for an unexplained one.
	Known string
}

// compare lists every field that differs between the two agents'
// requests for the same keys, and the keys only one agent has.
func compare(a, b map[string]flat, known []Known) []Difference {
	var out []Difference
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		fa, oka := a[k]
		fb, okb := b[k]
		if !oka || !okb {
			out = append(out, Difference{Key: k, Field: "(request)", A: present(oka), B: present(okb)})
			continue
		}
		fields := map[string]bool{}
		for f := range fa {
			fields[f] = true
		}
		for f := range fb {
			fields[f] = true
		}
		for f := range fields {
			if fa[f] != fb[f] {
				out = append(out, Difference{Key: k, Field: f, A: orNone(fa[f]), B: orNone(fb[f])})
			}
		}
	}
	for i := range out {
		for _, kn := range known {
			if kn.Path.MatchString(out[i].Key + " " + out[i].Field) {
				out[i].Known = kn.Reason
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Field < out[j].Field
	})
	return out
}

func present(ok bool) string {
	if ok {
		return "sent"
	}
	return "(not sent)"
}

func orNone(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// sortEnvs orders a container config's envs by name: the kubelet builds
// them from a map, so their order carries nothing.
func sortEnvs(req map[string]any) {
	cfg, _ := req["config"].(map[string]any)
	envs, _ := cfg["envs"].([]any)
	key := func(e any) string {
		m, _ := e.(map[string]any)
		k, _ := m["key"].(string)
		return k
	}
	sort.SliceStable(envs, func(i, j int) bool { return key(envs[i]) < key(envs[j]) })
}
