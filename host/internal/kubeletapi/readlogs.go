package kubeletapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// pollInterval is how often a follow looks at the file without a change
// notification, as the kubelet's logForceCheckPeriod; it also notices the
// container stopping.
var pollInterval = time.Second

// readBufferSize is the log reader's buffer; CRI runtimes cut lines at
// 16 KiB.
const readBufferSize = 64 << 10

// openLog opens a container's log file, symbolic links resolved (so a
// follow watches the real file's directory).
func openLog(path string) (*os.File, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open log file %q: %w", path, err)
	}
	f, err := os.Open(resolved)
	if err != nil {
		return nil, fmt.Errorf("failed to open log file %q: %w", path, err)
	}
	return f, nil
}

// copyLogs writes the log in f to stdout and stderr as o asks (stdout and
// stderr may be the same writer, or nil to leave a stream out). Without
// follow it writes the file as it is when called; with follow it goes on
// writing what the container appends until running reports false (nil: at
// once) and the file is read to its end, or ctx ends. f stays open.
func copyLogs(ctx context.Context, f *os.File, o readOptions, running func() bool, stdout, stderr io.Writer) error {
	w := newLogWriter(stdout, stderr, o)
	start, end := int64(0), int64(-1)
	if o.tailLines >= 0 {
		var err error
		if start, end, err = tailStart(f, o.tailLines); err != nil {
			return fmt.Errorf("failed to tail %d lines of log file %q: %w", o.tailLines, f.Name(), err)
		}
	} else if !o.follow {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		end = fi.Size()
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("failed to seek in log file %q: %w", f.Name(), err)
	}
	var err error
	if o.follow {
		err = follow(ctx, f, w, running)
	} else {
		err = copyAll(io.LimitReader(f, end-start), w)
	}
	if errors.Is(err, errLimitReached) {
		return nil
	}
	return err
}

// copyAll writes every entry of r, the last one even without its newline.
func copyAll(r io.Reader, w *logWriter) error {
	br := bufio.NewReaderSize(r, readBufferSize)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if werr := w.writeLine(line); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// tailStart scans f and returns the offset at which its last n lines start
// (a line being an entry after a full one of its stream, with the partial
// entries it continues in), and the offset of the end of the scan. The scan
// reads the whole file, which the kubelet's rotation keeps small (10 MiB by
// default).
func tailStart(f *os.File, n int64) (start, end int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	br := bufio.NewReaderSize(f, readBufferSize)
	var (
		starts []int64 // ring of the last n line starts; oldest at next once full
		next   int
		mid    [2]bool
		off    int64
		rec    record
	)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 && parseRecord(line, &rec) == nil {
			if !mid[rec.stream] && n > 0 {
				if int64(len(starts)) < n {
					starts = append(starts, off)
				} else {
					starts[next] = off
					next = (next + 1) % len(starts)
				}
			}
			mid[rec.stream] = rec.partial
		}
		off += int64(len(line))
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, 0, rerr
		}
	}
	switch {
	case n == 0:
		return off, off, nil
	case int64(len(starts)) < n:
		return 0, off, nil
	}
	return starts[next], off, nil
}

// follow writes f's entries from its offset on as they are appended. At the
// end of the file it waits for a change (fsnotify on the directory, or
// pollInterval); when running reports false it reads to the end once more
// and returns. When the file is replaced at its path (the kubelet rotated
// it), it finishes the old file and goes on with the new one from its
// start. An entry being written (no newline yet) waits for its end.
func follow(ctx context.Context, f *os.File, w *logWriter, running func() bool) error {
	path := f.Name()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var opened *os.File // a file follow opened itself (after a rotation)
	defer func() {
		if opened != nil {
			opened.Close()
		}
	}()
	br := bufio.NewReaderSize(f, readBufferSize)
	var pending []byte
	drain := func() error {
		for {
			chunk, err := br.ReadBytes('\n')
			if err == io.EOF {
				pending = append(pending, chunk...)
				return nil
			}
			if err != nil {
				return fmt.Errorf("failed to read log file %q: %w", path, err)
			}
			line := chunk
			if len(pending) > 0 {
				line = append(pending, chunk...)
				pending = pending[:0]
			}
			if err := w.writeLine(line); err != nil {
				return err
			}
		}
	}

	var watcher *fsnotify.Watcher
	defer func() {
		if watcher != nil {
			watcher.Close()
		}
	}()
	watchTried, stopped := false, false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := drain(); err != nil {
			return err
		}
		if stopped {
			return nil
		}
		if nf, nfi, ok := replaced(path, fi); ok {
			// Entries written to the old file just before the runtime
			// reopened it.
			if err := drain(); err != nil {
				nf.Close()
				return err
			}
			if opened != nil {
				opened.Close()
			}
			opened, fi = nf, nfi
			br.Reset(nf)
			pending = pending[:0]
			continue
		}
		if running == nil || !running() {
			stopped = true
			continue
		}
		if !watchTried {
			watchTried = true
			if watcher, err = watchDir(filepath.Dir(path)); err == nil {
				continue // read again: the write may have come before the watch
			}
			watcher = nil // poll
		}
		if err := waitChange(ctx, watcher); err != nil {
			return err
		}
	}
}

// replaced opens the file now at path when it is not cur.
func replaced(path string, cur os.FileInfo) (*os.File, os.FileInfo, bool) {
	fi, err := os.Stat(path)
	if err != nil || os.SameFile(fi, cur) {
		return nil, nil, false
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, false
	}
	return f, fi, true
}

func watchDir(dir string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// waitChange waits for an event of watcher (nil: none), pollInterval, or the
// end of ctx (its error).
func waitChange(ctx context.Context, watcher *fsnotify.Watcher) error {
	var (
		events <-chan fsnotify.Event
		errs   <-chan error
	)
	if watcher != nil {
		events, errs = watcher.Events, watcher.Errors
	}
	t := time.NewTimer(pollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-events:
	case <-errs:
	case <-t.C:
	}
	return nil
}
