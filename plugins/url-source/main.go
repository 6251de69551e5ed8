// Command url-source is wasmlet's pod source for an HTTP(S) URL, the
// kubelet's --manifest-url as a plugin: the URL serves one pod or a PodList
// (kind List works too), in YAML or JSON; every poll is a GET with
// If-None-Match, and the pods it serves are the source's whole set (a SET).
// The host makes them static pods: name suffixed with the node name, UID the
// config hash, kubernetes.io/config.source the plugin's name.
//
// When the URL fails (transport error, a status other than 200/304) or
// serves something that is not pods, the poll returns an error: the host
// logs it and keeps the last good set, so running pods survive an outage.
// A 304 answer is "no change".
//
// Config:
//
//	url: http://127.0.0.1:8080/pods.yaml   # its host must be in permissions.allowedHosts; empty disables the source
//	pollInterval: 20s                      # poll interval (the kubelet's http-check-frequency); the host
//	                                       # reads it too, for the polls after a failed one
//	timeout: 10s                           # per request; bounded by the manifest's permissions.timeout
//	header: "Authorization=Bearer x"       # optional request headers, NAME=value lines
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

// etagKey is where the last good answer's ETag is kept (the KV store
// survives instances and reloads).
const etagKey = "etag"

type urlSource struct{}

// Poll fetches the URL.
func (urlSource) Poll(req sdk.SourceRequest) (sdk.SourceResult, error) {
	interval := duration("pollInterval", 20*time.Second)
	res := sdk.SourceResult{NextPoll: interval}
	url, _ := sdk.Config("url")
	if url == "" {
		if req.Seq == 1 {
			sdk.Log(sdk.LevelInfo, "url-source: config url is empty; serving no pods")
			res.Updates = []sdk.PodUpdate{{Op: sdk.OpSet, Pods: []json.RawMessage{}}}
		}
		res.NextPoll = 5 * time.Minute
		return res, nil
	}
	hreq := sdk.HTTPRequest{Method: "GET", URL: url, Headers: map[string]string{"Accept": "application/yaml, application/json"},
		TimeoutMillis: duration("timeout", 10*time.Second).Milliseconds()}
	headers, err := policy.Pairs("header")
	if err != nil {
		return res, err
	}
	for _, h := range headers {
		hreq.Headers[h[0]] = h[1]
	}
	// The first poll of an instance set (a start or a reload) fetches the
	// whole set, so the host learns it even if its state was lost.
	if etag, ok, _ := sdk.KVGet(etagKey); ok && req.Seq > 1 && len(etag) > 0 {
		hreq.Headers["If-None-Match"] = string(etag)
	}
	resp, err := sdk.HTTP(hreq)
	if err != nil {
		return res, err
	}
	switch resp.Status {
	case 304:
		return res, nil
	case 200:
	default:
		return res, fmt.Errorf("GET %s: status %d", url, resp.Status)
	}
	pods, err := Decode(resp.Body)
	if err != nil {
		return res, fmt.Errorf("GET %s: %w", url, err)
	}
	if etag := header(resp.Headers, "ETag"); etag != "" {
		if err := sdk.KVSet(etagKey, []byte(etag)); err != nil {
			sdk.Logf(sdk.LevelWarn, "url-source: %v", err)
		}
	} else {
		_ = sdk.KVDelete(etagKey)
	}
	res.Updates = []sdk.PodUpdate{{Op: sdk.OpSet, Pods: pods}}
	return res, nil
}

// Decode reads one pod, a PodList or a List (YAML or JSON) into pods' JSON.
// Anything else is an error, so garbage never empties the set.
func Decode(body []byte) ([]json.RawMessage, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("empty body")
	}
	js, err := yamlToJSON(body)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var head struct {
		Kind       string                `json:"kind"`
		APIVersion string                `json:"apiVersion"`
		Metadata   struct{ Name string } `json:"metadata"`
		Items      []json.RawMessage     `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	switch {
	case head.Kind == "Pod" && head.APIVersion == "v1":
		if head.Metadata.Name == "" {
			return nil, errors.New("pod without metadata.name")
		}
		return []json.RawMessage{js}, nil
	case (head.Kind == "PodList" || head.Kind == "List") && head.APIVersion == "v1":
		pods := make([]json.RawMessage, 0, len(head.Items))
		for i, it := range head.Items {
			var item struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(it, &item); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			if item.Kind != "" && item.Kind != "Pod" {
				return nil, fmt.Errorf("item %d: kind %q, want Pod", i, item.Kind)
			}
			if item.Metadata.Name == "" {
				return nil, fmt.Errorf("item %d: pod without metadata.name", i)
			}
			pods = append(pods, it)
		}
		return pods, nil
	}
	return nil, fmt.Errorf("want a v1 Pod or PodList, got kind %q apiVersion %q", head.Kind, head.APIVersion)
}

// header finds a response header whatever its case.
func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// duration reads a Go duration (or a number of seconds) from config.
func duration(key string, def time.Duration) time.Duration {
	v, ok := sdk.Config(key)
	if !ok || v == "" {
		return def
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	sdk.Logf(sdk.LevelWarn, "url-source: config %s: %q is not a duration; using %v", key, v, def)
	return def
}

func init() { sdk.Register(urlSource{}) }

func main() {}
