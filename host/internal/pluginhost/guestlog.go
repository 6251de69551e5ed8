package pluginhost

import (
	"sync"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// logBudget caps the guest output a plugin may put in the host log: max
// bytes per minute, the rest dropped and counted until the end of the call
// reports them (takeDropped).
type logBudget struct {
	mu      sync.Mutex
	max     int
	used    int
	dropped int // dropped and not yet reported
	window  time.Time
}

// allow charges n bytes and reports whether they may be logged.
func (b *logBudget) allow(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Sub(b.window) >= time.Minute {
		b.window, b.used = now, 0
	}
	if b.used+n > b.max {
		b.dropped++
		return false
	}
	b.used += n
	return true
}

// takeDropped returns the lines dropped since it was last called, and
// forgets them.
func (b *logBudget) takeDropped() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.dropped
	b.dropped = 0
	return n
}

// reportLogDrops says, once a call is over, how many of the guest's lines
// the budget dropped during it: a log line and the plugin's
// wasmlet_plugin_log_lines_dropped_total.
func (p *Plugin) reportLogDrops() {
	n := p.logBudget.takeDropped()
	if n == 0 {
		return
	}
	p.stats.logDropped(n)
	p.log.Warn("guest log budget exceeded, lines dropped during the call", "dropped", n, "budget_bytes_per_minute", p.logBudget.max)
}

// guestLog forwards one guest message (log import or stdout/stderr line) to
// the plugin's logger, within its budget.
func (p *Plugin) guestLog(level abi.LogLevel, stream string, msg []byte) {
	if !p.logBudget.allow(len(msg)) {
		return
	}
	s := string(msg)
	switch level {
	case abi.LogDebug:
		p.log.Debug(s, "stream", stream)
	case abi.LogWarn:
		p.log.Warn(s, "stream", stream)
	case abi.LogError:
		p.log.Error(s, "stream", stream)
	default:
		p.log.Info(s, "stream", stream)
	}
}
