// Command cridiff records the CRI requests an agent sends and compares two
// agents' requests for the same pods field by field: hack/cri-diff.sh runs
// the kubelet and wasmlet in turn on the same static pods through it.
//
//	cridiff proxy -listen unix:///P.sock -to unix:///C.sock -out FILE.jsonl
//	cridiff diff [-known FILE] [-a-replace OLD=NEW,...] [-b-replace ...] A.jsonl B.jsonl
//
// proxy forwards every CRI call to the runtime and appends the
// RunPodSandbox and CreateContainer requests to FILE as JSON lines; diff
// prints every field that differs (the first request per pod and
// container), marks those listed in the known-differences file with their
// reason and exits 1 when any is unexplained.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "proxy":
		err = proxyCmd(os.Args[2:])
	case "diff":
		var unexplained int
		unexplained, err = diffCmd(os.Args[2:], os.Stdout)
		if err == nil && unexplained > 0 {
			os.Exit(1)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cridiff:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cridiff proxy -listen unix:///P.sock -to unix:///C.sock -out FILE.jsonl")
	fmt.Fprintln(os.Stderr, "       cridiff diff [-known FILE] [-a-name N] [-b-name N] [-a-replace OLD=NEW,...] [-b-replace ...] A.jsonl B.jsonl")
	os.Exit(2)
}

func proxyCmd(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	listen := fs.String("listen", "", "unix socket to serve CRI on")
	to := fs.String("to", "", "the runtime's CRI endpoint")
	out := fs.String("out", "", "file the recorded requests are appended to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *to == "" || *out == "" {
		return fmt.Errorf("proxy: -listen, -to and -out are required")
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return proxy(ctx, *listen, *to, f)
}

// replacements parses OLD=NEW,OLD=NEW.
func replacements(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func diffCmd(args []string, w io.Writer) (int, error) {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	knownFile := fs.String("known", "", "file of documented differences (REGEXP<TAB>REASON)")
	aName := fs.String("a-name", "kubelet", "name of the first recording's agent")
	bName := fs.String("b-name", "wasmlet", "name of the second recording's agent")
	aRepl := fs.String("a-replace", "", "OLD=NEW,... replaced in the first recording's values")
	bRepl := fs.String("b-replace", "", "OLD=NEW,... replaced in the second recording's values")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if fs.NArg() != 2 {
		return 0, fmt.Errorf("diff: want two recordings")
	}
	var known []Known
	if *knownFile != "" {
		var err error
		if known, err = readKnown(*knownFile); err != nil {
			return 0, err
		}
	}
	var recs [2]map[string]flat
	for i, ag := range []Agent{{*aName, replacements(*aRepl)}, {*bName, replacements(*bRepl)}} {
		f, err := os.Open(fs.Arg(i))
		if err != nil {
			return 0, err
		}
		recs[i], err = load(f, ag)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", fs.Arg(i), err)
		}
	}
	diffs := compare(recs[0], recs[1], known)
	unexplained := 0
	for _, d := range diffs {
		mark := "DIFF "
		if d.Known != "" {
			mark = "known"
		} else {
			unexplained++
		}
		fmt.Fprintf(w, "%s %s %s: %s=%s %s=%s", mark, d.Key, d.Field, *aName, d.A, *bName, d.B)
		if d.Known != "" {
			fmt.Fprintf(w, " (%s)", d.Known)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d sandboxes and containers compared: %d fields differ, %d documented, %d unexplained\n",
		max(len(recs[0]), len(recs[1])), len(diffs), len(diffs)-unexplained, unexplained)
	return unexplained, nil
}
