// Package kubeletconfig renders the real kubelet's KubeletConfiguration as
// the hack/ tools run it, from the template kubelet.yaml of this directory,
// which the shell scripts render with kubelet_config
// (hack/lib/kubelet-config.sh) by the same rules.
package kubeletconfig

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed kubelet.yaml
var template string

// placeholder is a ${name} of the template.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z]+)\}`)

// Render is the template with each ${name} replaced by values[name]; a line
// with a name given no value (or "") is left out, and so are the
// template's comment lines. A name the template lacks is an error.
func Render(values map[string]string) (string, error) {
	used := map[string]bool{}
	var b strings.Builder
lines:
	for _, line := range strings.SplitAfter(template, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, m := range placeholder.FindAllStringSubmatch(line, -1) {
			used[m[1]] = true
			if values[m[1]] == "" {
				continue lines
			}
		}
		b.WriteString(placeholder.ReplaceAllStringFunc(line, func(p string) string { return values[p[2:len(p)-1]] }))
	}
	for name := range values {
		if !used[name] {
			return "", fmt.Errorf("kubeletconfig: the template has no ${%s}", name)
		}
	}
	return b.String(), nil
}
