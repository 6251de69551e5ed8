package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wasmlet/wasmlet/internal/syncbuf"
)

type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake", RuntimeVersion: "1"}, nil
}

func (fakeRuntime) RunPodSandbox(_ context.Context, r *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb-" + r.Config.Metadata.Name}, nil
}

// The proxy forwards calls it does not record and records RunPodSandbox,
// answering with the runtime's response.
func TestProxy(t *testing.T) {
	dir := t.TempDir()
	rtSock, proxySock := filepath.Join(dir, "rt.sock"), filepath.Join(dir, "p.sock")
	l, err := net.Listen("unix", rtSock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, fakeRuntime{})
	go srv.Serve(l)
	defer srv.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncbuf.Buffer{}
	go proxy(ctx, "unix://"+proxySock, "unix://"+rtSock, out)
	conn, err := grpc.NewClient("unix://"+proxySock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := runtimeapi.NewRuntimeServiceClient(conn)
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	var v *runtimeapi.VersionResponse
	for v == nil { // the proxy may not listen yet
		if v, err = c.Version(cctx, &runtimeapi.VersionRequest{}); err != nil && cctx.Err() != nil {
			t.Fatal(err)
		}
	}
	if v.RuntimeName != "fake" {
		t.Errorf("Version through the proxy: %+v", v)
	}
	sb, err := c.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "u1"}}})
	if err != nil || sb.PodSandboxId != "sb-web" {
		t.Fatalf("RunPodSandbox through the proxy: %v %v", sb, err)
	}
	if _, err := c.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "x"}); err == nil || !strings.Contains(err.Error(), "Unimplemented") {
		t.Errorf("an error of the runtime not passed through: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("recorded %d requests, want the RunPodSandbox only:\n%s", len(lines), out.String())
	}
	var rec Record
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec.Method != "/runtime.v1.RuntimeService/RunPodSandbox" || !strings.Contains(string(rec.Request), `"name":"web"`) {
		t.Errorf("record %s (%v)", lines[0], err)
	}
}

func record(t *testing.T, method string, req any) string {
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(Record{Method: "/runtime.v1.RuntimeService/" + method, Request: b})
	return string(line) + "\n"
}

// Two recordings of the same pod compare field by field after the
// agents' own strings are replaced; only the first request per key
// counts; documented differences are marked, the others counted.
func TestCompare(t *testing.T) {
	sandbox := func(uid, logDir string, labels map[string]string) map[string]any {
		return map[string]any{"config": map[string]any{
			"metadata":     map[string]any{"name": "web", "namespace": "default", "uid": uid},
			"logDirectory": logDir, "labels": labels,
		}}
	}
	ctr := func(uid, image string) map[string]any {
		return map[string]any{"podSandboxId": "id-" + uid,
			"config":        map[string]any{"metadata": map[string]any{"name": "c"}, "image": map[string]any{"image": image}},
			"sandboxConfig": map[string]any{"metadata": map[string]any{"name": "web", "uid": uid}}}
	}
	a := record(t, "RunPodSandbox", sandbox("ua", "/var/log/pods/default_web_ua", map[string]string{"app": "web"})) +
		record(t, "CreateContainer", ctr("ua", "busybox")) +
		record(t, "CreateContainer", ctr("ua", "second-attempt-ignored"))
	b := record(t, "RunPodSandbox", sandbox("ub", "/tmp/logs/default_web_ub", map[string]string{"app": "web", "io.wasmlet.managed": "true"})) +
		record(t, "CreateContainer", ctr("ub", "busybox:other"))
	ra, err := load(strings.NewReader(a), Agent{Name: "kubelet", Replace: map[string]string{"/var/log/pods": "<logs>"}})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := load(strings.NewReader(b), Agent{Name: "wasmlet", Replace: map[string]string{"/tmp/logs": "<logs>"}})
	if err != nil {
		t.Fatal(err)
	}
	known := readKnownText(t, "^sandbox \\S+ config\\.labels\\.io\\.wasmlet\\.managed$\twasmlet marks what it made\n")
	diffs := compare(ra, rb, known)
	var got []string
	for _, d := range diffs {
		got = append(got, d.Key+" "+d.Field+" "+d.A+" "+d.B+" ["+d.Known+"]")
	}
	want := []string{
		`container web/c config.image.image busybox busybox:other []`,
		`sandbox web config.labels.io.wasmlet.managed (unset) true [wasmlet marks what it made]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func readKnownText(t *testing.T, text string) []Known {
	p := filepath.Join(t.TempDir(), "known.txt")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := readKnown(p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Env order and the termination log's random name are not differences.
func TestLoad_normalizes(t *testing.T) {
	req := func(envs []map[string]string, tl string) string {
		return record(t, "CreateContainer", map[string]any{
			"config": map[string]any{"metadata": map[string]any{"name": "c"}, "envs": envs,
				"mounts": []any{map[string]any{"hostPath": tl}}},
			"sandboxConfig": map[string]any{"metadata": map[string]any{"name": "p", "uid": "u"}}})
	}
	a, err := load(strings.NewReader(req([]map[string]string{{"key": "B"}, {"key": "A"}}, "/r/pods/u/containers/c/0a1b2c3d")), Agent{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := load(strings.NewReader(req([]map[string]string{{"key": "A"}, {"key": "B"}}, "/r/pods/u/containers/c/ffffeeee")), Agent{})
	if err != nil {
		t.Fatal(err)
	}
	if d := compare(a, b, nil); len(d) != 0 {
		t.Errorf("differences %+v, want none", d)
	}
}
