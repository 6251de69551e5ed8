package kubeletapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// timestampFormat is the fixed-width RFC 3339 time the kubelet prefixes
// lines with when timestamps are asked for.
const timestampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// errLimitReached ends a read when limitBytes have been written.
var errLimitReached = errors.New("limitBytes reached")

// readOptions are v1.PodLogOptions resolved for the reader.
type readOptions struct {
	// tailLines is how many lines from the end to start at; negative: all.
	tailLines int64
	// limitBytes is how many bytes to write at most; 0: no limit.
	limitBytes int64
	// since drops lines stamped before it.
	since time.Time
	// follow keeps reading as the container writes, until it stops.
	follow bool
	// timestamps prefixes each line with its time.
	timestamps bool
}

// Streams of a record, indexes of logWriter's per-stream state.
const (
	streamStdout = 0
	streamStderr = 1
)

// record is one entry of a CRI log file: "<time> <stream> <tag> <text>\n",
// tag "P" for a partial line continued by the stream's next entry, "F" for
// the end of a line (further ":"-separated tags are ignored).
type record struct {
	time    time.Time
	stream  int
	partial bool
	text    []byte
}

// parseRecord parses one entry, with or without its newline.
func parseRecord(line []byte, rec *record) error {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return errors.New("timestamp is not found")
	}
	t, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return fmt.Errorf("unexpected timestamp: %w", err)
	}
	line = line[i+1:]
	if i = bytes.IndexByte(line, ' '); i < 0 {
		return errors.New("stream type is not found")
	}
	switch string(line[:i]) {
	case "stdout":
		rec.stream = streamStdout
	case "stderr":
		rec.stream = streamStderr
	default:
		return fmt.Errorf("unexpected stream type %q", line[:i])
	}
	line = line[i+1:]
	tags, text := line, []byte(nil)
	if i = bytes.IndexByte(line, ' '); i >= 0 {
		tags, text = line[:i], line[i+1:]
	}
	if i = bytes.IndexByte(tags, ':'); i >= 0 {
		tags = tags[:i]
	}
	rec.time, rec.partial, rec.text = t, string(tags) == "P", text
	return nil
}

// logWriter writes records as log text: partial entries joined into their
// line, the line's time as prefix with timestamps, lines before since left
// out (by the time of their first entry), at most limitBytes in all. A nil
// writer for a stream leaves that stream out without counting it.
type logWriter struct {
	out        [2]io.Writer
	since      time.Time
	timestamps bool
	remain     int64
	mid        [2]bool // the stream's last entry was partial
	skip       [2]bool // the stream's current line is before since
	buf        []byte
}

func newLogWriter(stdout, stderr io.Writer, o readOptions) *logWriter {
	w := &logWriter{out: [2]io.Writer{stdout, stderr}, since: o.since, timestamps: o.timestamps, remain: math.MaxInt64}
	if o.limitBytes > 0 {
		w.remain = o.limitBytes
	}
	return w
}

// writeLine writes the entry line. Lines that are not CRI entries are
// skipped, as the kubelet does. It returns errLimitReached once limitBytes
// are written.
func (w *logWriter) writeLine(line []byte) error {
	var rec record
	if parseRecord(line, &rec) != nil {
		return nil
	}
	s := rec.stream
	first := !w.mid[s]
	w.mid[s] = rec.partial
	if first {
		w.skip[s] = rec.time.Before(w.since)
	}
	out := w.out[s]
	if w.skip[s] || out == nil {
		return nil
	}
	b := w.buf[:0]
	if first && w.timestamps {
		b = rec.time.AppendFormat(b, timestampFormat)
		b = append(b, ' ')
	}
	b = append(b, rec.text...)
	if !rec.partial {
		b = append(b, '\n')
	}
	w.buf = b
	if int64(len(b)) > w.remain {
		b = b[:w.remain]
	}
	n, err := out.Write(b)
	w.remain -= int64(n)
	if err != nil {
		return err
	}
	if n < len(b) {
		return io.ErrShortWrite
	}
	if w.remain <= 0 {
		return errLimitReached
	}
	return nil
}
