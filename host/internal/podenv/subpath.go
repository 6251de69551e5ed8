package podenv

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// SubPath expands a volume mount's subPathExpr against env (the
// container's resolved environment) as the kubelet does: every referenced
// variable must be set to a non-empty value, and the result must be a
// relative path with no ".." element. The errors read as the kubelet's.
func SubPath(expr string, env []EnvVar) (string, error) {
	if expr == "" {
		return "", nil
	}
	vars := envMap(env)
	missing := map[string]bool{}
	p := expand(expr, func(name string) (string, bool) {
		v, ok := vars[name]
		if !ok || v == "" {
			missing[name] = true
		}
		return v, true
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("missing value for %s", strings.Join(names, ", "))
	}
	if err := CheckSubPath(p); err != nil {
		return "", err
	}
	return p, nil
}

// CheckSubPath rejects a subPath (given or expanded) that the kubelet
// refuses to mount: an absolute path, or one with a ".." element.
func CheckSubPath(p string) error {
	if p == "" {
		return nil
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("error SubPath `%s` must not be an absolute path", p)
	}
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		return fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", p)
	}
	return nil
}
