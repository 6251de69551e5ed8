// Command testbox is the workload of wasmlet's examples and end-to-end tests.
// The same program is built twice: natively (a static linux binary in a
// container image for containerd) and for wasip1 (a WASI module for the
// embedded runtime), so one pod manifest means the same thing on both.
//
// Arguments are steps separated by ";", run in order:
//
//	echo WORDS...        print WORDS
//	log EVERY WORDS...   print "WORDS <n>" every EVERY (a Go duration), forever
//	sleep DURATION|inf   sleep
//	exit CODE            exit with CODE
//	env [NAME...]        print NAME=value for each NAME (all variables without NAME)
//	append FILE WORDS... append a line to FILE
//	cat FILE             print FILE
//	spin                 busy-loop forever
//	oom MIB              allocate and touch MIB MiB, 1 MiB at a time
//	fill FILE MIB        write MIB MiB to FILE, 1 MiB at a time
//	watch EVERY FILE...  print "FILE=<content>" for each FILE every EVERY, forever
//	whoami URL           ask the API server at URL who the pod's service-account
//	                     token is (a SelfSubjectReview with the mounted token
//	                     and CA) and print "user=<name>" (native build only)
//
// On SIGTERM (native build) it prints "testbox: terminated" and exits 0, so a
// graceful kill is visible in the log.
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	onTerm(func() {
		fmt.Println("testbox: terminated")
		os.Exit(0)
	})
	for _, step := range split(os.Args[1:]) {
		if err := run(step); err != nil {
			fmt.Fprintf(os.Stderr, "testbox: %s: %v\n", strings.Join(step, " "), err)
			os.Exit(2)
		}
	}
}

func split(args []string) [][]string {
	var steps [][]string
	var cur []string
	for _, a := range args {
		if a == ";" {
			if len(cur) > 0 {
				steps = append(steps, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, a)
	}
	if len(cur) > 0 {
		steps = append(steps, cur)
	}
	return steps
}

var sink [][]byte

func run(step []string) error {
	cmd, args := step[0], step[1:]
	switch cmd {
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "log":
		if len(args) < 1 {
			return fmt.Errorf("want EVERY")
		}
		every, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		for n := 1; ; n++ {
			fmt.Printf("%s %d\n", strings.Join(args[1:], " "), n)
			time.Sleep(every)
		}
	case "sleep":
		if len(args) != 1 {
			return fmt.Errorf("want DURATION or inf")
		}
		if args[0] == "inf" {
			// A timer, not select{}: a wasip1 program whose every
			// goroutine blocks without one is ended by Go's deadlock
			// check (exit 2) once the runtime's own timers are done.
			for {
				time.Sleep(time.Hour)
			}
		}
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		time.Sleep(d)
	case "exit":
		code := 0
		if len(args) > 0 {
			c, err := strconv.Atoi(args[0])
			if err != nil {
				return err
			}
			code = c
		}
		os.Exit(code)
	case "env":
		if len(args) == 0 {
			env := os.Environ()
			sort.Strings(env)
			for _, e := range env {
				fmt.Println(e)
			}
		}
		for _, name := range args {
			fmt.Printf("%s=%s\n", name, os.Getenv(name))
		}
	case "append":
		if len(args) < 1 {
			return fmt.Errorf("want FILE")
		}
		f, err := os.OpenFile(args[0], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(f, strings.Join(args[1:], " "))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case "cat":
		if len(args) != 1 {
			return fmt.Errorf("want FILE")
		}
		b, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		os.Stdout.Write(b)
	case "spin":
		for x := uint64(0); ; x++ {
			if x == ^uint64(0) {
				fmt.Println(x)
			}
		}
	case "watch":
		if len(args) < 2 {
			return fmt.Errorf("want EVERY FILE...")
		}
		every, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		for {
			for _, f := range args[1:] {
				b, err := os.ReadFile(f)
				if err != nil {
					fmt.Printf("%s: %v\n", f, err)
					continue
				}
				fmt.Printf("%s=%s\n", f, strings.ReplaceAll(string(b), "\n", "\\n"))
			}
			time.Sleep(every)
		}
	case "whoami":
		if len(args) != 1 {
			return fmt.Errorf("want URL")
		}
		user, err := whoami(args[0])
		if err != nil {
			return err
		}
		fmt.Printf("user=%s\n", user)
	case "fill":
		if len(args) != 2 {
			return fmt.Errorf("want FILE MIB")
		}
		mib, err := strconv.Atoi(args[1])
		if err != nil {
			return err
		}
		f, err := os.Create(args[0])
		if err != nil {
			return err
		}
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(j)
		}
		for i := 0; i < mib && err == nil; i++ {
			_, err = f.Write(b)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Printf("wrote %d MiB to %s\n", mib, args[0])
	case "oom":
		if len(args) != 1 {
			return fmt.Errorf("want MIB")
		}
		mib, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			sink = append(sink, b)
		}
		fmt.Printf("allocated %d MiB\n", mib)
	default:
		return fmt.Errorf("unknown step %q", cmd)
	}
	return nil
}
