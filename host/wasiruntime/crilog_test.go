package wasiruntime

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogStream_Write(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	tests := []struct {
		name   string
		writes []string
		want   []string // "tag text"
	}{
		{"lines", []string{"a\nb\n"}, []string{"F a", "F b"}},
		{"split writes", []string{"he", "llo\nwor", "ld\n"}, []string{"F hello", "F world"}},
		{"empty line", []string{"\n"}, []string{"F "}},
		{"unterminated at end", []string{"tail"}, []string{"F tail"}},
		{"long line", []string{long + "\n"}, []string{"P " + long[:maxLogLine], "F " + long[maxLogLine:]}},
		{"long unterminated", []string{long}, []string{"P " + long[:maxLogLine], "F " + long[maxLogLine:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c", "0.log")
			lf, err := openLogFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s := &logStream{file: lf, stream: "stdout"}
			for _, w := range tt.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			s.flush()
			lf.close()
			var got []string
			for _, l := range readLog(t, path) {
				tag := "F"
				if l.partial {
					tag = "P"
				}
				if l.stream != "stdout" {
					t.Errorf("stream %q", l.stream)
				}
				got = append(got, tag+" "+l.text)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("log = %.80q, want %.80q", got, tt.want)
			}
		})
	}
}

// BenchmarkLogStream_Write is the cost of one logged line.
func BenchmarkLogStream_Write(b *testing.B) {
	lf, err := openLogFile(filepath.Join(b.TempDir(), "0.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer lf.close()
	s := &logStream{file: lf, stream: "stdout"}
	line := []byte("hello from wasmlet 42\n")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Write(line)
	}
}

// FuzzLogStream_Write checks that whatever a module writes, in whatever
// pieces, the log file's entries put together give back the bytes written
// (a newline per full entry), with no entry longer than maxLogLine.
func FuzzLogStream_Write(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), uint8(3))
	f.Add([]byte("no newline"), uint8(1))
	f.Add([]byte(strings.Repeat("y", maxLogLine*2+5)+"\n\n"), uint8(200))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		if bytes.IndexByte(data, '\r') >= 0 {
			t.Skip() // the scanner of readLog would not split there anyway; keep lines simple
		}
		path := filepath.Join(t.TempDir(), "0.log")
		lf, err := openLogFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := &logStream{file: lf, stream: "stderr"}
		n := int(chunk)%64 + 1
		for p := data; len(p) > 0; {
			k := min(n, len(p))
			s.Write(p[:k])
			p = p[k:]
		}
		s.flush()
		lf.close()
		var got []byte
		for _, l := range readLog(t, path) {
			if len(l.text) > maxLogLine {
				t.Fatalf("entry of %d bytes", len(l.text))
			}
			got = append(got, l.text...)
			if !l.partial {
				got = append(got, '\n')
			}
		}
		want := data
		if len(want) > 0 && want[len(want)-1] != '\n' {
			want = append(append([]byte{}, want...), '\n') // the last line is flushed as full
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("log gives back %q, wrote %q", got, data)
		}
	})
}
