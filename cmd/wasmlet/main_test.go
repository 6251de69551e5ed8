package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/host/agent"
)

func TestWasmlet(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string // substrings of stdout
		wantStderr []string // substrings of stderr
	}{
		{"help", []string{"help"}, 0, []string{"usage: wasmlet <command>", "  run ", "  version "}, nil},
		{"--help", []string{"--help"}, 0, []string{"usage: wasmlet <command>"}, nil},
		{"-h", []string{"-h"}, 0, []string{"usage: wasmlet <command>"}, nil},
		{"no command", nil, 2, nil, []string{"usage: wasmlet <command>"}},
		{"unknown command", []string{"frobnicate"}, 2, nil, []string{`unknown command "frobnicate"`, "usage: wasmlet <command>"}},
		{"version", []string{"version"}, 0, []string{"version: v", "\ncommit: ", "\ngo: ", "\nwazero: "}, nil},
		{"--version", []string{"--version"}, 0, []string{"version: v", "\ncommit: ", "\ngo: ", "\nwazero: "}, nil},
		{"version with an argument", []string{"version", "extra"}, 2, nil, []string{"usage: wasmlet version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := wasmlet(tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d", code, tt.wantCode)
			}
			// Each stream is empty unless something is expected on it.
			check := func(stream string, got *bytes.Buffer, want []string) {
				if len(want) == 0 && got.Len() > 0 {
					t.Errorf("%s not empty:\n%s", stream, got)
				}
				for _, w := range want {
					if !strings.Contains(got.String(), w) {
						t.Errorf("%s lacks %q:\n%s", stream, w, got)
					}
				}
			}
			check("stdout", &stdout, tt.wantStdout)
			check("stderr", &stderr, tt.wantStderr)
		})
	}
}

func TestVersionInfo(t *testing.T) {
	wazero := func(replace *debug.Module) []*debug.Module {
		return []*debug.Module{{Path: "k8s.io/api", Version: "v0.36.3"}, {Path: wazeroPath, Version: "v1.12.0", Replace: replace}}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: wazero(nil), Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "c15f0f9"}, {Key: "vcs.modified", Value: "false"}}},
			true, "commit=c15f0f9 go=go1.26.8 wazero=v1.12.0"},
		{"modified", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: wazero(nil), Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "c15f0f9"}, {Key: "vcs.modified", Value: "true"}}},
			true, "commit=c15f0f9 (modified) go=go1.26.8 wazero=v1.12.0"},
		{"replaced wazero", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: wazero(&debug.Module{Path: "../wazero"})},
			true, "commit=unknown go=go1.26.8 wazero=v1.12.0 => ../wazero"},
		{"no build info", nil, false, "commit=unknown go=unknown wazero=unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := versionInfo(tt.bi, tt.ok)
			if info[0] != [2]string{"version", agent.Version} {
				t.Errorf("first pair %q, want the agent's version", info[0])
			}
			var got []string
			for _, kv := range info[1:] {
				got = append(got, kv[0]+"="+kv[1])
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("got %s, want %s", g, tt.want)
			}
		})
	}
}
