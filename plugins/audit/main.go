// Command audit is wasmlet's first-party hook plugin that logs every
// lifecycle event (PreSandbox, PreCreate, Validate, PostStart, PreUpdate,
// PreStop, PostStop, PodTerminated) through the host's log function, one
// line each; a PostStop line ends with the exit code and the reason:
//
//	audit: PreCreate pod default/web-node1 uid 1f0c… container web image nginx:1.27
//	audit: PostStop pod default/web-node1 uid 1f0c… container web image nginx:1.27 exit code 137 reason OOMKilled
//
// Config: level (debug, info, warn; default info).
package main

import (
	"strconv"
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
	if req.ExitCode != nil {
		b.WriteString(" exit code ")
		b.WriteString(strconv.Itoa(int(*req.ExitCode)))
	}
	if req.Reason != "" {
		b.WriteString(" reason ")
		b.WriteString(req.Reason)
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
