// Command audit is wasmlet's first-party hook plugin that logs every
// lifecycle event (PreSandbox, PreCreate, PostStart, PreStop,
// PodTerminated) through the host's log function, one line each:
//
//	audit: PreCreate pod default/web-node1 uid 1f0c… container web image nginx:1.27
//
// Config: level (debug, info, warn; default info).
package main

import (
	"strings"

	"github.com/wasmlet/wasmlet/sdk"
)

type audit struct{}

// Hook logs the event and asks for nothing.
func (audit) Hook(req sdk.HookRequest) (sdk.Adjustment, error) {
	sdk.Log(level(), Line(req))
	return sdk.Adjustment{}, nil
}

// Line is the audit line of one event.
func Line(req sdk.HookRequest) string {
	var b strings.Builder
	b.WriteString("audit: ")
	b.WriteString(string(req.Point))
	b.WriteString(" pod ")
	b.WriteString(req.Pod.Namespace + "/" + req.Pod.Name)
	b.WriteString(" uid ")
	b.WriteString(req.Pod.UID)
	if c := req.Container; c != nil {
		b.WriteString(" container ")
		b.WriteString(c.Name)
		b.WriteString(" image ")
		b.WriteString(c.Image)
	}
	return b.String()
}

func level() sdk.LogLevel {
	v, _ := sdk.Config("level")
	switch strings.ToLower(v) {
	case "debug":
		return sdk.LevelDebug
	case "warn":
		return sdk.LevelWarn
	}
	return sdk.LevelInfo
}

// init registers the hook; it reads only basic fields (names, uid, image).
func init() { sdk.Register(audit{}, sdk.Reads(0)) }

func main() {}
