package podenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// VolumePath gives the host path behind a pod's volume (the volume
// manager's), for fileKeyRef.
type VolumePath func(pod *v1.Pod, volume string) (string, error)

// errNoKey is an env file without the key asked for.
var errNoKey = errors.New("key not found")

// fileKey reads a fileKeyRef (the EnvFiles feature, on by default since
// Kubernetes 1.34): the key of an env file at path within the pod's
// volume. The file is opened through an os.Root of the volume, so neither
// the path nor a symbolic link in the volume leads out of it. A missing
// file or key, or an empty value, leaves an optional variable out and
// fails any other.
func fileKey(volumePath VolumePath, pod *v1.Pod, name string, f *v1.FileKeySelector) (string, bool, error) {
	optional := f.Optional != nil && *f.Optional
	if volumePath == nil {
		return "", false, fmt.Errorf("env var %s: fileKeyRef: this node has no volumes to read env files from", name)
	}
	dir, err := volumePath(pod, f.VolumeName)
	if err != nil {
		return "", false, fmt.Errorf("env var %s: cannot find the volume %q referenced by fileKeyRef: %w", name, f.VolumeName, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", false, fmt.Errorf("env var %s: fileKeyRef volume %q: %w", name, f.VolumeName, err)
	}
	defer root.Close()
	file, err := root.Open(filepath.Clean(f.Path))
	if errors.Is(err, os.ErrNotExist) && optional {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("env var %s: env file %q in volume %q: %w", name, f.Path, f.VolumeName, err)
	}
	defer file.Close()
	v, err := envFileValue(file, f.Key)
	if err == nil && v == "" {
		err = errNoKey // an empty value counts as none, as the kubelet reads it
	}
	switch {
	case errors.Is(err, errNoKey) && optional:
		return "", false, nil
	case errors.Is(err, errNoKey):
		return "", false, fmt.Errorf("env var %s: key %q not found in env file %q of volume %q", name, f.Key, f.Path, f.VolumeName)
	case err != nil:
		return "", false, fmt.Errorf("env var %s: env file %q of volume %q: %w", name, f.Path, f.VolumeName, err)
	}
	return v, true, nil
}

// envFileValue is key's value in an env file as the kubelet reads one:
// lines KEY='value' (the value may span lines up to its closing quote, and
// a comment may follow it), blank lines and # comments between them; a
// KEY= followed by whitespace is an empty value, as a shell reads it. Any
// other line is an error naming its number.
func envFileValue(r io.Reader, key string) (string, error) {
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, rest, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			return "", fmt.Errorf("line %d: no '='", n)
		case k == "":
			return "", fmt.Errorf("line %d: empty variable name", n)
		case strings.TrimRight(k, " \t") != k:
			return "", fmt.Errorf("line %d: whitespace before '='", n)
		}
		if rest != strings.TrimLeft(rest, " \t") {
			if k == key {
				return "", nil
			}
			continue
		}
		if !strings.HasPrefix(rest, "'") {
			return "", fmt.Errorf("line %d: the value of %s is not in single quotes", n, k)
		}
		first := n
		var value strings.Builder
		rest = rest[1:]
		for {
			end := strings.IndexByte(rest, '\'')
			if end >= 0 {
				value.WriteString(rest[:end])
				if after := strings.TrimLeft(rest[end+1:], " \t"); after != "" && !strings.HasPrefix(after, "#") {
					return "", fmt.Errorf("line %d: text after the closing quote", n)
				}
				break
			}
			value.WriteString(rest)
			value.WriteByte('\n')
			if !sc.Scan() {
				return "", fmt.Errorf("line %d: the quote opened there is never closed", first)
			}
			n++
			rest = sc.Text()
		}
		if k == key {
			return value.String(), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errNoKey
}
