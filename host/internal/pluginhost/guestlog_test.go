package pluginhost

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

func TestLogBudget_Allow(t *testing.T) {
	b := logBudget{max: 10}
	steps := []struct {
		n  int
		ok bool
	}{{4, true}, {6, true}, {1, false}, {1, false}}
	for i, s := range steps {
		if ok := b.allow(s.n); ok != s.ok {
			t.Fatalf("step %d: allow(%d) = %v, want %v", i, s.n, ok, s.ok)
		}
	}
	if n := b.takeDropped(); n != 2 {
		t.Fatalf("takeDropped = %d, want 2", n)
	}
	if n := b.takeDropped(); n != 0 {
		t.Fatalf("takeDropped again = %d, want 0 (reported once)", n)
	}
	b.window = b.window.Add(-2 * 60e9) // the minute is over
	if !b.allow(1) {
		t.Fatal("new window: allow = false")
	}
}

// TestPlugin_GuestLog checks that the log import and guest stderr reach the
// host logger under the plugin's name, within the byte budget.
func TestPlugin_GuestLog(t *testing.T) {
	var out syncbuf.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug})
	p := load(t, goGuest(t), Config{Logger: log, GuestLogMax: 200, CacheDir: testCacheDir(t)})
	ctx := context.Background()
	p.Admit(ctx, admitReq(`"first"`))
	p.Admit(ctx, admitReq(`"panic"`))
	for i := 0; i < 20; i++ {
		p.Admit(ctx, admitReq(`"`+strings.Repeat("x", 50)+`"`))
	}
	s := out.String()
	if !strings.Contains(s, "plugin.goguest") || !strings.Contains(s, `admitting "first"`) || !strings.Contains(s, "goguest: asked to panic") {
		t.Fatalf("log lacks the guest's lines:\n%s", s)
	}
	if strings.Count(s, strings.Repeat("x", 50)) > 2 {
		t.Fatalf("log budget of 200 bytes/minute not applied:\n%s", s)
	}
	// Every call that lost lines says so when it ends, not at some later
	// call in a later minute; the plugin's counter adds them up.
	notices := strings.Count(s, "lines dropped during the call")
	if notices < 18 {
		t.Fatalf("%d drop notices for the ~18 calls over budget:\n%s", notices, s)
	}
	if st := p.Stats(); st.LogLinesDropped < uint64(notices) {
		t.Fatalf("LogLinesDropped = %d, want ≥ %d", st.LogLinesDropped, notices)
	}
}
