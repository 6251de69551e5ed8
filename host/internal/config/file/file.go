// Package file is the built-in static pod source: one pod per file (YAML or
// JSON) in a directory, watched with fsnotify and re-read periodically, made
// into static pods as the kubelet's file source does (name suffixed with the
// node name, UID = config hash, config annotations, API defaults).
//
// Only regular files are read (a symlink to one included), as by the
// kubelet: a FIFO, socket or device is never opened, so none can block the
// source. Whatever is wrong with a path — not a regular file, a dangling
// symlink or a symlink loop, unreadable, undecodable, more than one YAML
// document, a pod the API server would refuse (ValidateStatic), a pod name
// another file already holds — is logged once, naming the file, until it
// changes, and the path is skipped; every other pod is untouched. A file that was good and turns bad
// keeps its last good pod until it is fixed or removed, so a half-saved edit
// never kills a running pod.
package file

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/wasmlet/wasmlet/host/internal/config"
	"github.com/wasmlet/wasmlet/host/internal/regularfile"
)

// Config configures the file source.
type Config struct {
	// Path is the directory of manifests (or a single manifest file).
	Path string
	// NodeName is this node's name, the pods' name suffix and spec.nodeName.
	NodeName string
	// CheckFrequency is the period of the full re-read besides the watch;
	// 0 means 20 s.
	CheckFrequency time.Duration
	// Batch is how long changes seen by the watch are gathered before they
	// are sent as one update; 0 means 20 ms.
	Batch time.Duration
	// Logger receives one line per bad file; nil discards.
	Logger hclog.Logger
}

// Source is the file source. Create it with New.
type Source struct {
	cfg   Config
	log   hclog.Logger
	files map[string]*entry // by path; only Run's goroutine touches it
	// problems is what was last logged for each path that has one, so a
	// problem is logged once and again only when it changes.
	problems map[string]string
}

// entry is what the source knows of one file.
type entry struct {
	sum  [32]byte // of the content last read
	pod  *v1.Pod  // last good pod; nil if the file never decoded
	sent *v1.Pod  // the pod last sent for this file; nil if none
}

// New returns the file source of cfg.
func New(cfg Config) *Source {
	if cfg.CheckFrequency <= 0 {
		cfg.CheckFrequency = 20 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Source{cfg: cfg, log: cfg.Logger, files: map[string]*entry{}, problems: map[string]string{}}
}

// Name is "file".
func (s *Source) Name() string { return config.FileSource }

// Run sends a SET of every pod at start and at every CheckFrequency, and
// ADD/REMOVE updates for the files the watch reports in between, until ctx is
// done. A missing directory is an empty set (logged) until it appears.
func (s *Source) Run(ctx context.Context, updates chan<- config.PodUpdate) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	defer w.Close()
	watching := false
	watch := func() {
		if watching {
			return
		}
		if err := w.Add(s.cfg.Path); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				s.log.Error("cannot watch static pod path", "path", s.cfg.Path, "error", err)
			}
			return
		}
		watching = true
	}
	send := func(u config.PodUpdate) bool {
		u.Source = config.FileSource
		select {
		case updates <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	watch()
	if !send(config.PodUpdate{Op: config.OpSet, Pods: s.scan()}) {
		return ctx.Err()
	}

	tick := time.NewTicker(s.cfg.CheckFrequency)
	defer tick.Stop()
	dirty := map[string]bool{}
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			watch()
			clear(dirty)
			flush = nil
			if !send(config.PodUpdate{Op: config.OpSet, Pods: s.scan()}) {
				return ctx.Err()
			}
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file source: watcher closed")
			}
			if ev.Name == s.cfg.Path && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// The watched path itself went away: watch it again when it
				// is back (at the flush below, else at the next tick).
				watching = false
			}
			// true: the path was removed or renamed away in this batch,
			// so a file there at the flush is a new one.
			dirty[ev.Name] = dirty[ev.Name] || ev.Has(fsnotify.Remove|fsnotify.Rename)
			if flush == nil {
				flush = time.After(s.cfg.Batch)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file source: watcher closed")
			}
			s.log.Error("static pod path watch error", "path", s.cfg.Path, "error", err)
		case <-flush:
			flush = nil
			watch() // a replaced single file or a re-created directory
			add, remove := s.refresh(dirty)
			clear(dirty)
			if len(remove) > 0 && !send(config.PodUpdate{Op: config.OpRemove, Pods: remove}) {
				return ctx.Err()
			}
			if len(add) > 0 && !send(config.PodUpdate{Op: config.OpAdd, Pods: add}) {
				return ctx.Err()
			}
		}
	}
}

// scan reads every manifest and returns the current pods, sorted by file. Of
// two files with pods of the same name, the first in file order wins; the
// other is logged naming both files.
func (s *Source) scan() []*v1.Pod {
	paths, err := s.list()
	if err != nil {
		s.log.Error("cannot read static pod path", "path", s.cfg.Path, "error", err)
	}
	present := make(map[string]bool, len(paths))
	seen := make(map[string]bool, len(paths))
	names := make(map[string]string, len(paths))
	pods := make([]*v1.Pod, 0, len(paths))
	for _, p := range paths {
		present[p] = true
		if !s.regular(p) {
			continue
		}
		seen[p] = true
		e := s.read(p)
		if e == nil {
			continue
		}
		e.sent = nil
		if e.pod == nil || s.duplicate(names, p, e.pod) {
			continue
		}
		names[config.FullName(e.pod)] = p
		e.sent = e.pod
		s.resolved(p)
		pods = append(pods, e.pod.DeepCopy())
	}
	for p := range s.files {
		if !seen[p] {
			delete(s.files, p)
		}
	}
	for p := range s.problems {
		if !present[p] {
			delete(s.problems, p)
		}
	}
	return pods
}

// duplicate reports (and logs) whether another file than path already
// holds a pod of pod's name.
func (s *Source) duplicate(names map[string]string, path string, pod *v1.Pod) bool {
	owner, ok := names[config.FullName(pod)]
	if !ok || owner == path {
		return false
	}
	s.report(path, "static pod manifest skipped: another file has a pod of the same name", "pod", pod.Namespace+"/"+pod.Name, "other_file", owner)
	return true
}

// refresh re-reads the given paths; it returns the pods that are new or
// changed, and the pods whose file is gone or whose new content replaced
// them under another UID. A path whose value is true was removed since the
// last refresh: a file there now is a new pod even with the same content,
// so its pod is removed and added again (the kubelet's file source sees
// the removal and the creation one after the other, and restarts the pod).
func (s *Source) refresh(paths map[string]bool) (add, remove []*v1.Pod) {
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	names := make(map[string]string, len(s.files))
	for p, e := range s.files {
		if e.sent != nil {
			names[config.FullName(e.sent)] = p
		}
	}
	drop := func(prev *v1.Pod) {
		if prev != nil {
			remove = append(remove, prev.DeepCopy())
			delete(names, config.FullName(prev))
		}
	}
	for _, p := range sorted {
		if p != s.cfg.Path && !manifestName(p) {
			continue
		}
		var prev *v1.Pod
		if e := s.files[p]; e != nil {
			prev = e.sent
		}
		if !s.regular(p) {
			delete(s.files, p)
			drop(prev)
			continue
		}
		e := s.read(p)
		if paths[p] && prev != nil && e != nil && e.pod != nil {
			// Removed and created again: the old pod goes, the file's is
			// a new one.
			drop(prev)
			prev = nil
		} else if e == nil || e.pod == prev || e.pod == nil {
			// Unreadable, unchanged, or bad with its last good pod (or
			// none) already sent.
			continue
		}
		cur := e.pod
		if s.duplicate(names, p, cur) {
			drop(prev)
			e.sent = nil
			continue
		}
		if prev != nil && prev.UID != cur.UID {
			drop(prev)
		}
		add = append(add, cur.DeepCopy())
		e.sent = cur
		s.resolved(p)
		names[config.FullName(cur)] = p
	}
	return add, remove
}

// list returns the candidate manifest paths: the entries of the directory
// that are not hidden, or the path itself when it is not a directory. Which
// of them are regular files is for regular to say.
func (s *Source) list() ([]string, error) {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{s.cfg.Path}, nil
	}
	des, err := os.ReadDir(s.cfg.Path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		p := filepath.Join(s.cfg.Path, de.Name())
		if !manifestName(p) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// manifestName skips hidden files (editors' swap files, "..data").
func manifestName(p string) bool {
	return !strings.HasPrefix(filepath.Base(p), ".")
}

// regular reports whether path is (or links to) a regular file; when it is
// not — a directory, FIFO, socket or device, a dangling symlink or a symlink
// loop, or a path that cannot be looked at — that is reported once.
func (s *Source) regular(path string) bool {
	fi, err := os.Stat(path)
	switch {
	case err != nil && errors.Is(err, os.ErrNotExist) && !exists(path):
		delete(s.problems, path) // removed: nothing wrong with it
		return false
	case err != nil:
		s.report(path, "static pod manifest skipped: cannot stat it (a dangling symlink or a symlink loop?)", "error", err)
		return false
	case !fi.Mode().IsRegular():
		s.report(path, "static pod manifest skipped: not a regular file", "mode", fi.Mode().String())
		return false
	}
	return true
}

// exists reports whether path itself (not what a symlink names) exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// report logs msg at ERROR naming the file, unless that same problem was
// the last one logged for it.
func (s *Source) report(path, msg string, args ...any) {
	key := msg + fmt.Sprint(args...)
	if s.problems[path] == key {
		return
	}
	s.problems[path] = key
	s.log.Error(msg, append([]any{"file", path}, args...)...)
}

// resolved forgets path's problem once its pod is sent, so that it is
// logged again if it comes back.
func (s *Source) resolved(path string) { delete(s.problems, path) }

// maxManifestSize bounds a manifest file: the API server's request body
// limit (3 MiB), so no static pod is larger than an API pod can be.
const maxManifestSize = 3 << 20

// read reads one file, updating its entry; unchanged content is not decoded
// again. A problem is reported once.
func (s *Source) read(path string) *entry {
	b, err := regularfile.Read(path, maxManifestSize)
	if err != nil {
		s.report(path, "cannot read static pod manifest; skipped", "error", err)
		return s.files[path]
	}
	sum := sha256.Sum256(b)
	e := s.files[path]
	if e != nil && e.sum == sum {
		return e
	}
	if e == nil {
		e = &entry{}
		s.files[path] = e
	}
	e.sum = sum
	pod, err := Decode(b, path, s.cfg.NodeName)
	if err != nil {
		if e.pod != nil {
			s.report(path, "bad static pod manifest; keeping the pod of its last good content", "pod", e.pod.Namespace+"/"+e.pod.Name, "error", err)
		} else {
			s.report(path, "bad static pod manifest; skipped", "error", err)
		}
		return e
	}
	e.pod = pod
	return e
}

// Decode decodes one manifest (YAML or JSON) of the file at path into a
// static pod for the node: one document, kind Pod, apiVersion v1, then
// config.ApplyStaticDefaults, then the API server's rules
// (config.ValidateStatic). Errors name the file and the field.
func Decode(b []byte, path, nodeName string) (*v1.Pod, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%s: empty manifest", path)
	}
	if n, err := documents(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if n > 1 {
		return nil, fmt.Errorf("%s: %d YAML documents; a manifest file holds one pod", path, n)
	}
	var pod v1.Pod
	if err := yaml.Unmarshal(b, &pod); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pod.Kind != "Pod" || pod.APIVersion != "v1" {
		return nil, fmt.Errorf("%s: want kind Pod, apiVersion v1; got kind %q, apiVersion %q", path, pod.Kind, pod.APIVersion)
	}
	if pod.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name is empty", path)
	}
	if err := config.ApplyStaticDefaults(&pod, config.StaticOptions{NodeName: nodeName, Location: path, File: true}); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := config.Validate(&pod); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := config.ValidateStatic(&pod); err != nil {
		return nil, fmt.Errorf("%s: refused as the API server would: %w", path, err)
	}
	return &pod, nil
}

// documents counts the non-empty YAML documents of b.
func documents(b []byte) (int, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if len(bytes.TrimSpace(doc)) > 0 && !onlyComments(doc) {
			n++
		}
	}
}

// onlyComments reports whether a YAML document holds nothing but comments.
func onlyComments(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}
