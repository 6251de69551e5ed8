package objects

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wasmlet/wasmlet/host/internal/regularfile"
)

// maxManifestSize bounds what is read of one file.
const maxManifestSize = 64 << 20

// manifestFile is a file of the directory that may hold manifests.
type manifestFile struct {
	path string
	sig  string // size and modification time, to notice changes
}

// refreshLocked re-reads the directory if the interval has passed since it
// was last looked at and any file (or the directory) changed since it was
// last parsed. Callers hold l.mu.
func (l *Local) refreshLocked() {
	now := l.now()
	if l.loaded && now.Sub(l.checked) < l.interval {
		return
	}
	l.checked = now
	files, fingerprint, problems := l.scan()
	if l.loaded && fingerprint == l.fingerprint {
		return
	}
	l.loaded, l.fingerprint = true, fingerprint

	objs := make(map[objectKey]runtime.Object)
	from := make(map[objectKey]string)
	for _, f := range files {
		parsed, err := readManifests(f.path)
		if err != nil {
			problems["parse "+f.path] = problem{f.sig + err.Error(),
				fmt.Sprintf("skipping %s: %v", f.path, err)}
			continue
		}
		for _, obj := range parsed {
			k, ok := keyOf(obj)
			if !ok {
				continue
			}
			if first, dup := from[k]; dup {
				problems["duplicate "+k.String()+" "+f.path] = problem{first,
					fmt.Sprintf("%s is defined in %s and again in %s; using the first (%s)", k, first, f.path, first)}
				continue
			}
			objs[k], from[k] = obj, f.path
		}
	}
	l.objs = objs
	l.report(problems)
}

// problem is something wrong with the directory, logged once per change
// of sig.
type problem struct {
	sig string
	msg string
}

// report logs the problems not already logged with the same signature and
// forgets those that went away (so they are logged again if they come
// back).
func (l *Local) report(problems map[string]problem) {
	next := make(map[string]string, len(problems))
	for id, p := range problems {
		if l.reported[id] != p.sig {
			l.log.Warn(p.msg, "dir", l.dir)
		}
		next[id] = p.sig
	}
	l.reported = next
}

// scan lists the directory's manifest files in lexical order: regular
// files (symbolic links to them included) named *.yaml, *.yml or *.json,
// not starting with a dot. Nothing else is opened, so a FIFO cannot block.
// The fingerprint changes whenever any such name, its type, size or
// modification time (or the directory's readability) does.
func (l *Local) scan() (files []manifestFile, fingerprint string, problems map[string]problem) {
	problems = make(map[string]problem)
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		problems["dir"] = problem{err.Error(), fmt.Sprintf("cannot read --pod-objects-dir: %v", err)}
		return nil, "error: " + err.Error(), problems
	}
	var fp strings.Builder
	for _, e := range entries { // sorted by name
		name := e.Name()
		if strings.HasPrefix(name, ".") || !isManifestName(name) {
			continue
		}
		path := filepath.Join(l.dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			problems["stat "+path] = problem{err.Error(), fmt.Sprintf("skipping %s: %v", path, err)}
			fmt.Fprintf(&fp, "%s\x00%v\x00", name, err)
			continue
		}
		if !fi.Mode().IsRegular() {
			problems["type "+path] = problem{fi.Mode().String(),
				fmt.Sprintf("skipping %s: not a regular file (%s)", path, fi.Mode().Type())}
			fmt.Fprintf(&fp, "%s\x00%s\x00", name, fi.Mode())
			continue
		}
		sig := fmt.Sprintf("%d@%d", fi.Size(), fi.ModTime().UnixNano())
		files = append(files, manifestFile{path: path, sig: sig})
		fmt.Fprintf(&fp, "%s\x00%s\x00", name, sig)
	}
	return files, fp.String(), problems
}

// isManifestName reports whether name ends in .yaml, .yml or .json.
func isManifestName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readManifests reads and parses path, a regular file only (a FIFO is
// never waited on).
func readManifests(path string) ([]runtime.Object, error) {
	data, err := regularfile.Read(path, maxManifestSize)
	if err != nil {
		return nil, err
	}
	return parseManifests(data)
}
