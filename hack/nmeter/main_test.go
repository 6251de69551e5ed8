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
