package wasiruntime

import (
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/host/wasiruntime/image"
)

func TestArgv(t *testing.T) {
	plain := image.Image{}
	oci := image.Image{Entrypoint: []string{"/app.wasm"}, Cmd: []string{"serve", "--port=80"}}
	cmdOnly := image.Image{Cmd: []string{"/app.wasm", "run"}}
	tests := []struct {
		name          string
		command, args []string
		img           image.Image
		want          string
	}{
		{"command and args", []string{"/testbox"}, []string{"echo", "hi"}, plain, "/testbox echo hi"},
		{"args only: argv0 is the image", nil, []string{"echo", "hi"}, plain, "wasmlet.local/t:1 echo hi"},
		{"nothing", nil, nil, plain, "wasmlet.local/t:1"},
		{"image entrypoint and cmd", nil, nil, oci, "/app.wasm serve --port=80"},
		{"args replace cmd", nil, []string{"check"}, oci, "/app.wasm check"},
		{"command replaces entrypoint and cmd", []string{"/x"}, nil, oci, "/x"},
		{"image cmd only", nil, nil, cmdOnly, "/app.wasm run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(argv(tt.command, tt.args, tt.img, "wasmlet.local/t:1"), " "); got != tt.want {
				t.Errorf("argv = %q, want %q", got, tt.want)
			}
		})
	}
}
