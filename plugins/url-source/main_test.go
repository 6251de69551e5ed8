//go:build !wasip1

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: nginx
`

const listJSON = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"x"}]}},
 {"kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"x"}]}}]}`

func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		names []string
		err   string
	}{
		{"pod yaml", podYAML, []string{"web"}, ""},
		{"pod list json", listJSON, []string{"a", "b"}, ""},
		{"empty list", `{"apiVersion":"v1","kind":"List","items":[]}`, []string{}, ""},
		{"garbage", "<html>oops</html>\n:", nil, "not"},
		{"empty", "  \n", nil, "empty body"},
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", nil, "want a v1 Pod"},
		{"list with a service", `{"apiVersion":"v1","kind":"List","items":[{"kind":"Service","metadata":{"name":"s"}}]}`, nil, "kind \"Service\""},
		{"pod without name", "apiVersion: v1\nkind: Pod\nmetadata: {}\n", nil, "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, err := Decode([]byte(tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, p := range pods {
				var m struct{ Metadata struct{ Name string } }
				if err := json.Unmarshal(p, &m); err != nil {
					t.Fatal(err)
				}
				names = append(names, m.Metadata.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.names) {
				t.Fatalf("names = %v, want %v", names, tt.names)
			}
		})
	}
}

// TestURLSource_Poll runs polls natively against a fake HTTP host service.
func TestURLSource_Poll(t *testing.T) {
	var status atomic.Int32
	var body atomic.Value
	var lastINM atomic.Value
	status.Store(200)
	body.Store(podYAML)
	h := &sdk.NativeHost{
		Config: map[string]string{"url": "http://example.test/pods", "pollInterval": "3s"},
		KV:     map[string][]byte{},
		HTTP: func(r sdk.HTTPRequest) sdk.HTTPResponse {
			lastINM.Store(r.Headers["If-None-Match"])
			if r.Headers["If-None-Match"] == `"v1"` && body.Load() == podYAML {
				return sdk.HTTPResponse{Status: 304}
			}
			return sdk.HTTPResponse{Status: int(status.Load()), Body: []byte(body.Load().(string)), Headers: map[string]string{"Etag": `"v1"`}}
		},
	}
	prev := sdk.UseNativeHost(h)
	t.Cleanup(func() { sdk.UseNativeHost(prev) })

	res, err := urlSource{}.Poll(sdk.SourceRequest{Seq: 1})
	if err != nil || len(res.Updates) != 1 || res.Updates[0].Op != sdk.OpSet || len(res.Updates[0].Pods) != 1 {
		t.Fatalf("first poll: %+v, %v", res, err)
	}
	if res.NextPoll.Seconds() != 3 {
		t.Errorf("next poll %v, want 3s", res.NextPoll)
	}
	if inm := lastINM.Load(); inm != "" {
		t.Errorf("first poll sent If-None-Match %q", inm)
	}
	res, err = urlSource{}.Poll(sdk.SourceRequest{Seq: 2})
	if err != nil || len(res.Updates) != 0 {
		t.Fatalf("304 poll: %+v, %v", res, err)
	}
	if inm := lastINM.Load(); inm != `"v1"` {
		t.Errorf("If-None-Match = %q, want the ETag", inm)
	}
	body.Store(listJSON)
	res, err = urlSource{}.Poll(sdk.SourceRequest{Seq: 3})
	if err != nil || len(res.Updates) != 1 || len(res.Updates[0].Pods) != 2 {
		t.Fatalf("changed: %+v, %v", res, err)
	}
	for _, bad := range []struct {
		status int
		body   string
	}{{500, listJSON}, {200, "garbage: ["}, {404, ""}} {
		status.Store(int32(bad.status))
		body.Store(bad.body)
		if res, err := (urlSource{}).Poll(sdk.SourceRequest{Seq: 4}); err == nil {
			t.Errorf("status %d body %q: no error (%+v)", bad.status, bad.body, res)
		}
	}
	h.Config = map[string]string{"url": ""}
	res, err = urlSource{}.Poll(sdk.SourceRequest{Seq: 1})
	if err != nil || len(res.Updates) != 1 || len(res.Updates[0].Pods) != 0 {
		t.Fatalf("disabled: %+v, %v", res, err)
	}
}
