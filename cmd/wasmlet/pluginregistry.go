package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/wasmlet/wasmlet/host/plugin"
)

// registryFlags are the flags of the commands that reach a registry.
func registryFlags(fs *flag.FlagSet) *plugin.RegistryConfig {
	c := &plugin.RegistryConfig{}
	fs.StringVar(&c.DockerConfig, "registry-config", "", "a docker config.json with the registry credentials (default ~/.docker/config.json, or $DOCKER_CONFIG)")
	fs.StringVar(&c.CAFile, "registry-ca", "", "a PEM file of CAs trusted for the registry besides the system's")
	return c
}

// pluginPush is `wasmlet plugin push`.
func pluginPush(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	reg := registryFlags(fs)
	tests := fs.String("tests", "", "the directory of test fixtures *.yaml (default tests/ beside the manifest)")
	author := fs.String("author", "", "the author recorded in the artifact's config")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitError
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "usage: wasmlet plugin push [--tests DIR] [--author NAME] [--registry-config FILE] [--registry-ca FILE] DIR|FILE.plugin.yaml REF")
		return exitError
	}
	created, err := sourceDate()
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet plugin push: %v\n", err)
		return exitError
	}
	d, err := plugin.Push(context.Background(), plugin.PushConfig{
		Path: pos[0], TestsDir: *tests, Ref: pos[1], Author: *author, Created: created, Registry: *reg,
	})
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet plugin push: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "pushed %s@%s\n", pos[1], d)
	return 0
}

// sourceDate is $SOURCE_DATE_EPOCH as a time (zero when unset), so that a
// reproducible build pushes the same digest twice.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %v", s, err)
	}
	return time.Unix(n, 0), nil
}

// pluginPull is `wasmlet plugin pull`.
func pluginPull(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin pull", flag.ContinueOnError)
	fs.SetOutput(stderr)
	reg := registryFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitError
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, "usage: wasmlet plugin pull [--registry-config FILE] [--registry-ca FILE] REF DIR")
		return exitError
	}
	got, err := plugin.Pull(context.Background(), plugin.PullConfig{Ref: pos[0], Dir: pos[1], Registry: *reg})
	if err != nil {
		fmt.Fprintf(stderr, "wasmlet plugin pull: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "pulled %s@%s\n", pos[0], got.Digest)
	for _, f := range got.Files {
		fmt.Fprintf(stdout, "  %s\n", f)
	}
	return 0
}
