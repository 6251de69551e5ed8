package podenv

import (
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
)

// Expand replaces the $(VAR) references in s with their values in vars, as
// the kubelet's expansion does: "$$" is an escaped "$", a reference to a
// name vars does not hold is left as written, and a "$" not followed by
// "(" or "$" (or an unclosed "$(") is kept.
func Expand(s string, vars map[string]string) string {
	return expand(s, lookupIn(vars))
}

// lookupIn is a mapping that reads maps in order, the first holding the
// name winning.
func lookupIn(maps ...map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}

// expand is the expansion: each complete $(name) is replaced by what
// lookup gives, or kept as written when lookup does not know the name.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0 // start of the bytes not yet copied
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		b.WriteString(s[last:i])
		r, size := utf8.DecodeRuneInString(s[i+1:])
		switch r {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// An unclosed reference: keep "$(" and go on after it.
				b.WriteString("$(")
				i++
				break
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			// Not a reference. The kubelet writes the rune it decoded,
			// so an invalid UTF-8 byte comes out as U+FFFD.
			b.WriteByte('$')
			b.WriteRune(r)
			i += size
		}
		last = i + 1
	}
	b.WriteString(s[last:])
	return b.String()
}

// envMap is env as a map, a later variable of a name winning.
func envMap(env []EnvVar) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

// CommandAndArgs is the container's command and args with their $(VAR)
// references expanded against env (the container's resolved environment,
// as Env gives it), as the kubelet does before creating the container.
// Empty lists stay nil.
func CommandAndArgs(c *v1.Container, env []EnvVar) (command, args []string) {
	vars := envMap(env)
	return expandAll(c.Command, vars), expandAll(c.Args, vars)
}

// StaticCommand expands command against the container's declared env
// values only (no valueFrom, no envFrom, no service variables), as the
// kubelet does for an exec probe's command.
func StaticCommand(command []string, env []v1.EnvVar) []string {
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	return expandAll(command, vars)
}

// expandAll expands each string of list; nil for an empty list.
func expandAll(list []string, vars map[string]string) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = Expand(s, vars)
	}
	return out
}
