package wasiruntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// spinWasm is a WASI command whose _start spins without ever calling the
// host, its one function declaring locals i32 locals:
//
//	(module (memory (export "memory") 1)
//	  (func (export "_start") (local i32 ×locals) (loop (br 0))))
//
// The meter refuses a function of 50000 locals or more (no room for its
// own), so such a module exercises the close-on-context-done fallback.
func spinWasm(locals uint32) []byte {
	body := []byte{0x01}
	body = appendLEB(body, locals)
	body = append(body, 0x7f, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b)
	code := appendLEB([]byte{0x01}, uint32(len(body)))
	code = append(code, body...)
	b := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" +
		"\x03\x02\x01\x00" +
		"\x05\x03\x01\x00\x01" +
		"\x07\x13\x02\x06memory\x02\x00\x06_start\x00\x00")
	b = append(b, 0x0a)
	b = appendLEB(b, uint32(len(code)))
	return append(b, code...)
}

func appendLEB(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestModuleCache_Get checks which modules are metered and that
// StopContainer ends a spinning module of each kind within its timeout:
// testbox and a small spinning module are metered (the tick ends them), a
// module the meter refuses runs with close-on-context-done.
func TestModuleCache_Get(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	tests := []struct {
		name    string
		image   string
		wasm    []byte // nil: testbox, already imported
		args    []string
		metered bool
	}{
		{"testbox", testboxImage, nil, []string{"spin"}, true},
		{"spin", "wasmlet.local/spin:1", spinWasm(1), nil, true},
		{"spin-unmeterable", "wasmlet.local/spin:2", spinWasm(50000), nil, false},
	}
	sb, sbCfg := h.sandbox(t, "metered", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wasm != nil {
				p := filepath.Join(dir, tt.name+".wasm")
				if err := os.WriteFile(p, tt.wasm, 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := h.rt.images.Import(tt.image, p); err != nil {
					t.Fatal(err)
				}
			}
			img, err := h.rt.images.Resolve(tt.image)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := h.rt.modules.get(context.Background(), img, tt.image)
			if err != nil {
				t.Fatal(err)
			}
			wantRT := h.rt.wz.closing
			if tt.metered {
				wantRT = h.rt.wz.metered
			}
			if cm.metered != tt.metered || cm.rt != wantRT {
				t.Fatalf("metered = %v (in the metered runtime: %v), want %v", cm.metered, cm.rt == h.rt.wz.metered, tt.metered)
			}
			id := h.run(t, sb, sbCfg, tt.name, tt.args, func(c *runtimeapi.ContainerConfig) {
				c.Image = &runtimeapi.ImageSpec{Image: tt.image}
				if tt.args == nil {
					c.Command = nil
				}
			})
			time.Sleep(200 * time.Millisecond) // let it spin
			// The meter must stop the spinning module at once, not the
			// forced close at the end of the grace period (which cannot end
			// a metered module): with an hour of grace and the call bounded
			// at five minutes, waiting it out fails the call.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := h.rs.StopContainer(ctx, id, 3600); err != nil {
				t.Fatalf("StopContainer with an hour of grace: %v", err)
			}
			st := h.waitExit(t, id, time.Second)
			if st.ExitCode != exitKilled || st.Reason != "Error" || st.Message != "stopped by the runtime" {
				t.Errorf("after stop: exit %d %q %q, want %d Error", st.ExitCode, st.Reason, st.Message, exitKilled)
			}
		})
	}
}
