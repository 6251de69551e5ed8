// Package policy holds what the first-party plugins share: reading their
// manifest config (lists, booleans, key=value lines; a list is split once
// per instance), and namespace exemptions. It builds natively and for wasip1.
//
// Every helper reads config through sdk.Config, so in a policy bundle
// (sdk.RegisterPolicies) a key is the running policy's "<policy>.<key>" when
// the manifest sets it, else the plain "<key>".
package policy

import (
	"fmt"
	"strings"
	"sync"

	"github.com/wasmlet/wasmlet/sdk"
)

// List reads a comma- or newline-separated config value, trimmed, empty
// items dropped; def when the key is absent. The slice is shared by every
// call with the same value: the caller must not modify it (appending
// copies).
func List(key, def string) []string { return parse(key, def).list }

// ListSet is List as a Set, shared likewise: the caller must not modify it.
func ListSet(key, def string) Set { return parse(key, def).set }

// parsed is what List and ListSet made of one config value.
type parsed struct {
	raw  string
	list []string
	set  Set
}

// lists caches List's answers by key and, in a policy bundle, by the
// policy running (sdk.PolicyName): the same key may hold another value for
// each policy of a bundle. A plugin's config is fixed while an instance
// lives (abi/v1/SPEC.md; the SDK caches config_get's answers), so a policy
// splits a list or builds a set once per instance instead of at every call,
// where each allocation costs a Go guest about a microsecond and a map far
// more. An entry is used only while the raw value is the same, so a changed
// value (native tests swapping the NativeHost) is parsed afresh.
var lists struct {
	mu sync.Mutex
	m  map[listKey]*parsed
}

// listKey is what lists is keyed by: a struct, not a joined string, so a
// lookup allocates nothing.
type listKey struct{ policy, key string }

func parse(key, def string) *parsed {
	v, ok := sdk.Config(key)
	if !ok {
		v = def
	}
	k := listKey{sdk.PolicyName(), key}
	lists.mu.Lock()
	defer lists.mu.Unlock()
	if p := lists.m[k]; p != nil && p.raw == v {
		return p
	}
	l := SplitList(v)
	p := &parsed{raw: v, list: l[:len(l):len(l)], set: newSet(l)}
	if lists.m == nil {
		lists.m = make(map[listKey]*parsed)
	}
	lists.m[k] = p
	return p
}

// SplitList splits a comma- or newline-separated list, trimmed, empty items
// dropped.
func SplitList(v string) []string {
	var out []string
	for _, line := range strings.Split(v, "\n") {
		for _, item := range strings.Split(line, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// Bool reads a boolean config value ("true"/"false", "yes"/"no", "1"/"0");
// def when absent, an error naming the key when unreadable.
func Bool(key string, def bool) (bool, error) {
	v, ok := sdk.Config(key)
	if !ok {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "1", "on":
		return true, nil
	case "false", "no", "0", "off":
		return false, nil
	}
	return def, fmt.Errorf("config %s: %q is not a boolean", key, v)
}

// Pairs reads a config value of "key=value" lines (a YAML block scalar in
// the manifest), in order; a line without "=" is an error naming the key.
func Pairs(key string) ([][2]string, error) {
	v, ok := sdk.Config(key)
	if !ok {
		return nil, nil
	}
	var out [][2]string
	for i, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config %s: line %d %q: want NAME=value", key, i+1, line)
		}
		out = append(out, [2]string{k, val})
	}
	return out, nil
}

// Set is a set of strings.
type Set map[string]bool

// newSet makes a set of items.
func newSet(items []string) Set {
	s := make(Set, len(items))
	for _, it := range items {
		s[it] = true
	}
	return s
}

// Exempt reports whether namespace is listed in config key
// "exemptNamespaces" (comma-separated; def when absent).
func Exempt(namespace, def string) bool {
	return ListSet("exemptNamespaces", def)[namespace]
}
