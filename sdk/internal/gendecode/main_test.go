package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sdkDir is the sdk package, two levels up.
const sdkDir = "../.."

// TestGenerated fails when sdk/pod_decode.go is not what gendecode writes
// from the current pod.go and decoder.go.
func TestGenerated(t *testing.T) {
	want, err := generate(sdkDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(sdkDir, "pod_decode.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		t.Fatalf("sdk/pod_decode.go is stale: run go generate in sdk/. First difference at line %d:\n have %q\n want %q", i+1, line(gl, i), line(wl, i))
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// TestGenerate_Errors checks that a type the decoder cannot fill stops the
// generator instead of producing code that skips the field.
func TestGenerate_Errors(t *testing.T) {
	for _, tt := range []struct {
		name, field, want string
	}{
		{"float", "X float64 `json:\"x\"`", "Pod.X: the decoder has no way to decode a float64"},
		{"pointer without arena", "X *Sysctl `json:\"x\"`", "Pod.X: the decoder has no way to decode a *Sysctl"},
		{"map of ints", "X map[string]int `json:\"x\"`", "Pod.X: the decoder has no way to decode a map[string]int"},
		{"embedded without name", "Sysctl", "Pod embeds Sysctl without a JSON name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{"pod.go", "decoder.go"} {
				src, err := os.ReadFile(filepath.Join(sdkDir, name))
				if err != nil {
					t.Fatal(err)
				}
				if name == "pod.go" {
					const anchor = "type Pod struct {\n"
					if !bytes.Contains(src, []byte(anchor)) {
						t.Fatal("pod.go: no Pod struct")
					}
					src = bytes.Replace(src, []byte(anchor), []byte(anchor+"\t"+tt.field+"\n"), 1)
				}
				if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// EnvVar is an alias of abi.EnvVar in sdk.go; a copy here
			// spares the generator looking abi up.
			if err := os.WriteFile(filepath.Join(dir, "env.go"), []byte(envVar), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := generate(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

const envVar = `package sdk

type EnvVar struct {
	Name  string ` + "`json:\"name\"`" + `
	Value string ` + "`json:\"value\"`" + `
}
`
