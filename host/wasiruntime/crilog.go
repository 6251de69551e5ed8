package wasiruntime

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxLogLine is the longest line written as one CRI log entry; a longer line
// is split into partial ("P") entries, as containerd does at 16 KiB.
const maxLogLine = 16 << 10

// logFile is a container's CRI log file, shared by its stdout and stderr.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	buf  []byte
}

func openLogFile(path string) (*logFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	return &logFile{path: path, f: f}, nil
}

// entry writes one CRI log line: "<RFC3339Nano> <stream> <F|P> <text>\n".
func (l *logFile) entry(stream string, partial bool, text []byte) {
	tag := " F "
	if partial {
		tag = " P "
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	l.buf = time.Now().AppendFormat(l.buf[:0], time.RFC3339Nano)
	l.buf = append(l.buf, ' ')
	l.buf = append(l.buf, stream...)
	l.buf = append(l.buf, tag...)
	l.buf = append(l.buf, text...)
	l.buf = append(l.buf, '\n')
	l.f.Write(l.buf) // a full disk loses log lines, never the workload
}

// reopen closes and reopens the file (CRI ReopenContainerLog, after the
// kubelet rotated it).
func (l *logFile) reopen() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (l *logFile) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// logStream is the io.Writer a module's stdout or stderr writes to: it cuts
// the byte stream into lines for the log file.
type logStream struct {
	file    *logFile
	stream  string // "stdout" or "stderr"
	pending []byte
}

// Write implements io.Writer. A module's stream is written by one goroutine.
func (s *logStream) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.pending = append(s.pending, p...)
			for len(s.pending) >= maxLogLine {
				s.file.entry(s.stream, true, s.pending[:maxLogLine])
				s.pending = append(s.pending[:0], s.pending[maxLogLine:]...)
			}
			break
		}
		line := p[:i]
		if len(s.pending) > 0 {
			s.pending = append(s.pending, line...)
			line = s.pending
		}
		for len(line) > maxLogLine {
			s.file.entry(s.stream, true, line[:maxLogLine])
			line = line[maxLogLine:]
		}
		s.file.entry(s.stream, false, line)
		s.pending = s.pending[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush writes an unterminated last line as a full entry, as containerd does
// when a stream ends.
func (s *logStream) flush() {
	if len(s.pending) > 0 {
		s.file.entry(s.stream, false, s.pending)
		s.pending = s.pending[:0]
	}
}
