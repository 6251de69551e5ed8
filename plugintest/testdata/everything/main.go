// Command everything is plugintest's test plugin: it implements every kind and
// uses every host service, so one test run checks the SDK's imports and
// exports against the real host.
package main

import (
	"encoding/json"
	"strconv"

	"github.com/wasmlet/wasmlet/sdk"
)

type everything struct{}

// Admit answers by pod name; each name exercises one host service and
// reports what it saw in a denial's message.
func (everything) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	switch req.Pod.Name {
	case "config":
		v, ok := sdk.Config("greeting")
		return sdk.Deny("Config", v+" "+strconv.FormatBool(ok)), nil
	case "count":
		n := 0
		if b, ok, err := sdk.KVGet("count"); err != nil {
			return sdk.Verdict{}, err
		} else if ok {
			n, _ = strconv.Atoi(string(b))
		}
		n++
		if err := sdk.KVSet("count", []byte(strconv.Itoa(n))); err != nil {
			return sdk.Verdict{}, err
		}
		return sdk.Deny("Count", strconv.Itoa(n)), nil
	case "http":
		url, _ := sdk.Config("url")
		resp, err := sdk.HTTP(sdk.HTTPRequest{Method: "GET", URL: url})
		if err != nil {
			return sdk.Deny("HTTPError", err.Error()), nil
		}
		return sdk.Deny("HTTP", strconv.Itoa(resp.Status)+" "+string(resp.Body)), nil
	case "node":
		n, err := sdk.ThisNode()
		if err != nil {
			return sdk.Deny("NodeError", err.Error()), nil
		}
		return sdk.Deny("Node", n.Name+" "+n.Labels["zone"]), nil
	case "log":
		sdk.Log(sdk.LevelWarn, "hello from the guest")
		return sdk.Allow(), nil
	case "panic":
		panic("guest panic")
	case "privileged":
		for _, c := range req.Pod.Spec.AllContainers() {
			if c.SecurityContext.IsPrivileged() {
				return sdk.Deny("Privileged", c.Name), nil
			}
		}
	}
	return sdk.Allow(), nil
}

// Poll returns one pod per poll, named after the poll's sequence number.
func (everything) Poll(req sdk.SourceRequest) (sdk.SourceResult, error) {
	pod, _ := json.Marshal(map[string]any{"metadata": map[string]string{"name": "seq-" + strconv.FormatUint(req.Seq, 10)}})
	return sdk.SourceResult{Updates: []sdk.PodUpdate{{Op: sdk.OpSet, Pods: []json.RawMessage{pod}}}}, nil
}

// Hook labels what it was called for.
func (everything) Hook(req sdk.HookRequest) (sdk.Adjustment, error) {
	labels := map[string]string{"point": string(req.Point), "pod": req.Pod.Name}
	if req.Container != nil {
		labels["container"] = req.Container.Name
	}
	return sdk.Adjustment{Labels: labels, Env: []sdk.EnvVar{{Name: "HOOKED", Value: "1"}}}, nil
}

func init() { sdk.Register(everything{}) }

func main() {}
