package certificate

import (
	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
)

// hclogSink carries client-go's contextual (logr) logs into the agent's
// hclog logger: levels 0 to 2 (where the certificate manager says what it
// requests, waits for and got) at info, errors at error; higher levels
// (client-go's request and response dumps) are dropped.
type hclogSink struct {
	log  hclog.Logger
	name string
	kv   []any
}

func newLogger(l hclog.Logger) logr.Logger { return logr.New(&hclogSink{log: l}) }

func (s *hclogSink) Init(logr.RuntimeInfo) {}

// maxLevel is the highest logr level passed on.
const maxLevel = 2

func (s *hclogSink) Enabled(level int) bool { return level <= maxLevel }

func (s *hclogSink) Info(level int, msg string, kv ...any) {
	if level > maxLevel {
		return
	}
	s.log.Info(s.prefix()+msg, append(append([]any{}, s.kv...), kv...)...)
}

func (s *hclogSink) Error(err error, msg string, kv ...any) {
	args := append(append([]any{}, s.kv...), kv...)
	s.log.Error(s.prefix()+msg, append(args, "error", err)...)
}

func (s *hclogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.kv = append(append([]any{}, s.kv...), kv...)
	return &c
}

func (s *hclogSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}

func (s *hclogSink) prefix() string {
	if s.name == "" {
		return ""
	}
	return s.name + ": "
}
