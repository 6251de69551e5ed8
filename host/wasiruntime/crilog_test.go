package wasiruntime

import (
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
