package wasiruntime

import (
	"sort"
	"strings"
)

// matchID matches an ID filter as containerd does: empty matches all,
// otherwise the full ID or a prefix of it.
func matchID(id, filter string) bool {
	return filter == "" || strings.HasPrefix(id, filter)
}

// matchLabels reports whether labels contain every key=value of selector.
func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// sortByCreation orders list items oldest first, for stable output.
func sortByCreation[T any](items []T, created func(T) int64) {
	sort.SliceStable(items, func(i, j int) bool { return created(items[i]) < created(items[j]) })
}
