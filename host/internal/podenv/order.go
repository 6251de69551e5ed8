package podenv

import (
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

// usableName reports whether an envFrom key can name a variable at all:
// not empty, and without '=' or NUL.
func usableName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}
