package podenv

import (
	"sort"
	"strings"
)

// orderedEnv is a set of variables that remembers the order in which
// names were first set; setting a name again replaces its value in place.
type orderedEnv struct {
	names  []string
	values map[string]string
}

// set sets name to value.
func (e *orderedEnv) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// list is the variables in order.
func (e *orderedEnv) list() []EnvVar {
	out := make([]EnvVar, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, EnvVar{Name: n, Value: e.values[n]})
	}
	return out
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// usableName reports whether an envFrom key can name a variable at all:
// not empty, and without '=' or NUL.
func usableName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}
