package plugin

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLogBudget_Allow(t *testing.T) {
	b := logBudget{max: 10}
	steps := []struct {
		n       int
		ok      bool
		dropped int
	}{{4, true, 0}, {6, true, 0}, {1, false, 0}, {1, false, 0}}
	for i, s := range steps {
		ok, dropped := b.allow(s.n)
		if ok != s.ok || dropped != s.dropped {
			t.Fatalf("step %d: allow(%d) = %v, %d; want %v, %d", i, s.n, ok, dropped, s.ok, s.dropped)
		}
	}
	b.window = b.window.Add(-2 * 60e9) // the minute is over
	if ok, dropped := b.allow(1); !ok || dropped != 2 {
		t.Fatalf("new window: allow = %v, %d; want true and 2 dropped reported", ok, dropped)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPlugin_GuestLog checks that the log import and guest stderr reach the
// host logger under the plugin's name, within the byte budget.
func TestPlugin_GuestLog(t *testing.T) {
	var out syncBuffer
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
}
