package main

import (
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	at := time.Date(2026, 11, 27, 1, 2, 3, 456789000, time.UTC)
	for format, want := range map[string]string{
		"%3t":       "01:02:03.456",
		"%t":        "01:02:03",
		"%6t done":  "01:02:03.456789 done",
		"100%% %x":  "100% %x",
		"trailing%": "trailing%",
	} {
		if got := render(format, at); got != want {
			t.Errorf("render(%q) = %q, want %q", format, got, want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		delay  int
		format string
		err    bool
	}{
		{[]string{"-d0", "%3t"}, 0, "%3t", false},
		{[]string{"-d", "250", "%t"}, 250, "%t", false},
		{[]string{"%t"}, 1000, "%t", false},
		{[]string{"-dx", "%t"}, 0, "", true},
		{[]string{"-d0"}, 0, "", true},
	} {
		d, f, err := parseArgs(tc.args)
		if (err != nil) != tc.err || d != tc.delay || f != tc.format {
			t.Errorf("parseArgs(%q) = %d, %q, %v", tc.args, d, f, err)
		}
	}
}
