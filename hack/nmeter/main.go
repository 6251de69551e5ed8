// Command nmeter is the part of busybox's nmeter that Kubernetes' node
// conformance specs use, for the offline busybox image (Debian's
// busybox-static has no nmeter applet): `nmeter [-d MS] FORMAT` prints
// FORMAT once every MS milliseconds (0: without a pause) until its output
// is closed, where %[N]t is the time of day as HH:MM:SS with N digits of
// fractional seconds and %% is a percent sign; other text is copied.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	delay, format, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nmeter:", err, "\nusage: nmeter [-d MS] FORMAT")
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	for {
		fmt.Fprintln(w, render(format, time.Now()))
		if err := w.Flush(); err != nil {
			return // the reader is gone (head -n1)
		}
		if delay > 0 {
			time.Sleep(time.Duration(delay) * time.Millisecond)
		}
	}
}

// parseArgs reads busybox's arguments: -d MS or -dMS (default 1000),
// then the format.
func parseArgs(args []string) (delay int, format string, err error) {
	delay = 1000
	for len(args) > 0 && strings.HasPrefix(args[0], "-d") {
		v := strings.TrimPrefix(args[0], "-d")
		args = args[1:]
		if v == "" {
			if len(args) == 0 {
				return 0, "", fmt.Errorf("-d needs a value")
			}
			v, args = args[0], args[1:]
		}
		if delay, err = strconv.Atoi(v); err != nil || delay < 0 {
			return 0, "", fmt.Errorf("-d %q is not a number of milliseconds", v)
		}
	}
	if len(args) != 1 {
		return 0, "", fmt.Errorf("want one format, got %q", args)
	}
	return delay, args[0], nil
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
