package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, texts []string) string {
		var b strings.Builder
		for i, s := range texts {
			fmt.Fprintf(&b, "2026-11-21T09:00:00.%09dZ stderr F %s\n", i, s)
		}
		b.WriteString("2026-11-21T09:00:01.000000000Z stderr\n") // no text: skipped
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	want := func(texts []string, lines, maxBytes int) string {
		if len(texts) > lines {
			texts = texts[len(texts)-lines:]
		}
		s := strings.Join(texts, "\n")
		if len(s) > maxBytes {
			s = s[len(s)-maxBytes:]
		}
		return s
	}
	small := []string{"first line", "with spaces in it", "last"}
	var big []string // a log far larger than what the tail needs
	for i := 0; i < 20000; i++ {
		big = append(big, fmt.Sprintf("line %d of a long log", i))
	}
	for _, c := range []struct {
		name            string
		texts           []string
		lines, maxBytes int
	}{
		{"small", small, 80, 2048},
		{"small, two lines", small, 2, 2048},
		{"big, line-bound", big, 80, 1 << 20},
		{"big, byte-bound", big, 80, 2048},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := logTail(write(strings.ReplaceAll(c.name, " ", ""), c.texts), c.lines, c.maxBytes)
			if w := want(c.texts, c.lines, c.maxBytes); got != w {
				t.Errorf("logTail = %q\nwant %q", got, w)
			}
		})
	}
	if got := logTail(filepath.Join(dir, "missing"), 80, 2048); got != "" {
		t.Errorf("missing file: %q", got)
	}
}
