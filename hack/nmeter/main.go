// Command nmeter is the part of busybox's nmeter that Kubernetes' node
// conformance specs use, for the offline busybox image (Debian's
// busybox-static has no nmeter applet): `nmeter [-d MS] FORMAT` prints
// FORMAT once every MS milliseconds (0: without a pause) until its output
// is closed, where %[N]t is the time of day as HH:MM:SS with N digits of
// fractional seconds and %% is a percent sign; other text is copied.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	delay := flag.Int("d", 1000, "milliseconds between lines (0: none)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: nmeter [-d MS] FORMAT")
		os.Exit(2)
	}
	format := flag.Arg(0)
	w := bufio.NewWriter(os.Stdout)
	for {
		fmt.Fprintln(w, render(format, time.Now()))
		if err := w.Flush(); err != nil {
			return // the reader is gone (head -n1)
		}
		if *delay > 0 {
			time.Sleep(time.Duration(*delay) * time.Millisecond)
		}
	}
}

// render expands format's %[N]t and %% at t.
func render(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		digits := 0
		if d := format[i]; d >= '0' && d <= '9' && i+1 < len(format) {
			digits = int(d - '0')
			i++
		}
		switch format[i] {
		case 't':
			b.WriteString(t.Format("15:04:05"))
			if digits > 0 {
				frac := fmt.Sprintf("%09d", t.Nanosecond())
				b.WriteString("." + frac[:min(digits, 9)])
			}
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
