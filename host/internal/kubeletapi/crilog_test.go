package kubeletapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

// deadline bounds every wait in these tests; nothing asserts speed.
const deadline = 30 * time.Second

// criFile is a CRI log with partial lines, both streams, a line that is not
// an entry, a shorter timestamp and an entry without text.
const criFile = `2024-01-01T00:00:01.000000000Z stdout F one
2024-01-01T00:00:02.000000000Z stderr F two
2024-01-01T00:00:03.000000000Z stdout P thr
2024-01-01T00:00:03.500000000Z stdout P e
2024-01-01T00:00:04.000000000Z stdout F e!
not a CRI entry
2024-01-01T00:00:05.123Z stderr F five
2024-01-01T00:00:06.000000000Z stdout F six
2024-01-01T00:00:07.000000000Z stdout F
2024-01-01T00:00:08.000000000Z stdout F:x eight
`

func writeLog(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func appendLog(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, path string, o readOptions, stdout, stderr bool) string {
	t.Helper()
	f, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	var outW, errW io.Writer
	if stdout {
		outW = &buf
	}
	if stderr {
		errW = &buf
	}
	if err := copyLogs(context.Background(), f, o, nil, outW, errW); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestCopyLogs(t *testing.T) {
	all := readOptions{tailLines: -1}
	tests := []struct {
		name           string
		o              readOptions
		stdout, stderr bool
		want           string
	}{
		{"all", all, true, true, "one\ntwo\nthree!\nfive\nsix\n\neight\n"},
		{"timestamps", readOptions{tailLines: -1, timestamps: true}, true, true,
			"2024-01-01T00:00:01.000000000Z one\n" +
				"2024-01-01T00:00:02.000000000Z two\n" +
				"2024-01-01T00:00:03.000000000Z three!\n" +
				"2024-01-01T00:00:05.123000000Z five\n" +
				"2024-01-01T00:00:06.000000000Z six\n" +
				"2024-01-01T00:00:07.000000000Z \n" +
				"2024-01-01T00:00:08.000000000Z eight\n"},
		{"stdout only", all, true, false, "one\nthree!\nsix\n\neight\n"},
		{"stderr only", all, false, true, "two\nfive\n"},
		{"tail 0", readOptions{tailLines: 0}, true, true, ""},
		{"tail 1", readOptions{tailLines: 1}, true, true, "eight\n"},
		{"tail 5 counts a joined line once", readOptions{tailLines: 5}, true, true, "three!\nfive\nsix\n\neight\n"},
		{"tail more than there are", readOptions{tailLines: 100}, true, true, "one\ntwo\nthree!\nfive\nsix\n\neight\n"},
		{"limitBytes", readOptions{tailLines: -1, limitBytes: 6}, true, true, "one\ntw"},
		{"limitBytes counts timestamps", readOptions{tailLines: -1, limitBytes: 33, timestamps: true}, true, true, "2024-01-01T00:00:01.000000000Z on"},
		{"limitBytes counts only the streams written", readOptions{tailLines: -1, limitBytes: 8}, false, true, "two\nfive"},
		{"since a line's first entry", readOptions{tailLines: -1, since: ts("2024-01-01T00:00:03Z")}, true, true, "three!\nfive\nsix\n\neight\n"},
		{"since inside a joined line", readOptions{tailLines: -1, since: ts("2024-01-01T00:00:03.2Z")}, true, true, "five\nsix\n\neight\n"},
		{"since with tail", readOptions{tailLines: 3, since: ts("2024-01-01T00:00:06.5Z")}, true, true, "\neight\n"},
	}
	path := writeLog(t, criFile)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readAll(t, path, tt.o, tt.stdout, tt.stderr); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCopyLogs_lastEntryWithoutNewline(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout F b")
	for _, o := range []readOptions{{tailLines: -1}, {tailLines: 1}} {
		want := "a\nb\n"
		if o.tailLines == 1 {
			want = "b\n"
		}
		if got := readAll(t, path, o, true, true); got != want {
			t.Errorf("tail %d: got %q, want %q", o.tailLines, got, want)
		}
	}
}

func TestParseRecord(t *testing.T) {
	var r record
	if err := parseRecord([]byte("2024-01-01T00:00:01+02:00 stderr P a b \n"), &r); err != nil {
		t.Fatal(err)
	}
	if !r.time.Equal(ts("2023-12-31T22:00:01Z")) || r.stream != streamStderr || !r.partial || string(r.text) != "a b " {
		t.Errorf("got %+v", r)
	}
	for _, bad := range []string{"", "nospace", "2024-01-01 stdout F x", "2024-01-01T00:00:01Z", "2024-01-01T00:00:01Z stdin F x"} {
		if err := parseRecord([]byte(bad), &r); err == nil {
			t.Errorf("%q: parsed", bad)
		}
	}
}

func waitFor(t *testing.T, b *syncbuf.Buffer, want string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		if b.String() == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("output %q, want %q", b.String(), want)
}

// startFollow runs copyLogs with follow on path; the returned channel
// receives its result.
func startFollow(t *testing.T, ctx context.Context, path string, o readOptions, running func() bool, out *syncbuf.Buffer) <-chan error {
	t.Helper()
	f, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	o.follow = true
	done := make(chan error, 1)
	go func() { done <- copyLogs(ctx, f, o, running, out, out) }()
	return done
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline):
		t.Fatal("follow did not end")
		return nil
	}
}

func TestCopyLogs_follow(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F one\n2024-01-01T00:00:02Z stdout F two\n")
	var running atomic.Bool
	running.Store(true)
	var out syncbuf.Buffer
	done := startFollow(t, context.Background(), path, readOptions{tailLines: 1, timestamps: true}, running.Load, &out)
	waitFor(t, &out, "2024-01-01T00:00:02.000000000Z two\n")

	// A partial entry, then a full one written in two pieces.
	appendLog(t, path, "2024-01-01T00:00:03Z stderr P thr\n2024-01-01T00:00:04Z stderr F ee")
	appendLog(t, path, "\n")
	waitFor(t, &out, "2024-01-01T00:00:02.000000000Z two\n2024-01-01T00:00:03.000000000Z three\n")

	// Written before the container stops: read before the follow ends.
	appendLog(t, path, "2024-01-01T00:00:05Z stdout F four\n")
	running.Store(false)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "2024-01-01T00:00:02.000000000Z two\n2024-01-01T00:00:03.000000000Z three\n2024-01-01T00:00:05.000000000Z four\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCopyLogs_followStoppedContainer(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F one\n")
	var out syncbuf.Buffer
	done := startFollow(t, context.Background(), path, readOptions{tailLines: -1}, func() bool { return false }, &out)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "one\n" {
		t.Errorf("got %q", got)
	}
}

func TestCopyLogs_followClientGone(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F one\n")
	ctx, cancel := context.WithCancel(context.Background())
	var out syncbuf.Buffer
	done := startFollow(t, ctx, path, readOptions{tailLines: -1}, func() bool { return true }, &out)
	waitFor(t, &out, "one\n")
	cancel()
	if err := waitDone(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestCopyLogs_followLimitBytes(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F one\n")
	var out syncbuf.Buffer
	done := startFollow(t, context.Background(), path, readOptions{tailLines: -1, limitBytes: 6}, func() bool { return true }, &out)
	waitFor(t, &out, "one\n")
	appendLog(t, path, "2024-01-01T00:00:02Z stdout F two\n")
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "one\ntw" {
		t.Errorf("got %q", got)
	}
}

func TestCopyLogs_followRotation(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F one\n")
	var running atomic.Bool
	running.Store(true)
	var out syncbuf.Buffer
	done := startFollow(t, context.Background(), path, readOptions{tailLines: -1}, running.Load, &out)
	waitFor(t, &out, "one\n")

	// The kubelet's rotation: rename, then the runtime reopens a new file.
	if err := os.Rename(path, path+".20240101-000002"); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path+".20240101-000002", "2024-01-01T00:00:02Z stdout F two\n")
	if err := os.WriteFile(path, []byte("2024-01-01T00:00:03Z stdout F three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "one\ntwo\nthree\n")
	appendLog(t, path, "2024-01-01T00:00:04Z stdout F four\n")
	waitFor(t, &out, "one\ntwo\nthree\nfour\n")
	running.Store(false)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestOpenLog_missing(t *testing.T) {
	_, err := openLog(filepath.Join(t.TempDir(), "nope.log"))
	if err == nil || !strings.Contains(err.Error(), "failed to open log file") {
		t.Errorf("got %v", err)
	}
}
