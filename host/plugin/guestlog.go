package plugin

import (
	"sync"
	"time"

	"github.com/wasmlet/wasmlet/abi"
)

// logBudget caps the guest output a plugin may put in the host log: max
// bytes per minute, the rest dropped and counted.
type logBudget struct {
	mu      sync.Mutex
	max     int
	used    int
	dropped int
	window  time.Time
}

// allow charges n bytes and reports whether they may be logged, and how many
// lines were dropped in the window that just ended.
func (b *logBudget) allow(n int) (ok bool, droppedBefore int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Sub(b.window) >= time.Minute {
		droppedBefore = b.dropped
		b.window, b.used, b.dropped = now, 0, 0
	}
	if b.used+n > b.max {
		b.dropped++
		return false, droppedBefore
	}
	b.used += n
	return true, droppedBefore
}

// guestLog forwards one guest message (log import or stdout/stderr line) to
// the plugin's logger, within its budget.
func (p *Plugin) guestLog(level abi.LogLevel, stream string, msg []byte) {
	ok, dropped := p.logBudget.allow(len(msg))
	if dropped > 0 {
		p.log.Warn("guest log budget exceeded, lines dropped", "dropped", dropped, "budget_bytes_per_minute", p.logBudget.max)
	}
	if !ok {
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
