package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// auditLine is one audit event as the API server writes it.
func auditLine(id, stage, verb, user, resource, sub, uri, received string) string {
	ref := ""
	if resource != "" {
		ref = `,"objectRef":{"resource":"` + resource + `","subresource":"` + sub + `","apiVersion":"v1"}`
	}
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id + `","stage":"` + stage +
		`","requestURI":"` + uri + `","verb":"` + verb + `","user":{"username":"` + user + `","groups":["system:nodes"]}` + ref +
		`,"requestReceivedTimestamp":"` + received + `","stageTimestamp":"` + received + `"}` + "\n"
}

func TestAudit_Read(t *testing.T) {
	const (
		n1 = "system:node:wasmlet-000"
		n2 = "system:node:wasmlet-001"
		t0 = "2026-01-01T00:00:00.000000Z"
		t1 = "2026-01-01T00:00:30.000000Z"
		t2 = "2026-01-01T00:01:30.000000Z"
	)
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(auditLine("old", "ResponseComplete", "get", n1, "nodes", "", "/api/v1/nodes/x", t0)), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := NewAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := auditLine("a", "ResponseComplete", "update", n1, "leases", "", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/wasmlet-000", t1) +
		auditLine("b", "ResponseComplete", "patch", n1, "nodes", "status", "/api/v1/nodes/wasmlet-000/status", t1) +
		auditLine("c", "ResponseStarted", "watch", n1, "pods", "", "/api/v1/pods?watch=true", t1) +
		auditLine("d", "ResponseStarted", "watch", n2, "pods", "", "/api/v1/pods?watch=true", t1) +
		auditLine("d", "ResponseComplete", "watch", n2, "pods", "", "/api/v1/pods?watch=true", t2) +
		auditLine("e", "ResponseComplete", "get", n2, "", "", "/version?timeout=32s", t1) +
		auditLine("f", "ResponseComplete", "get", "system:admin", "nodes", "", "/api/v1/nodes", t1) +
		auditLine("g", "ResponseComplete", "update", n1, "leases", "", "/x", t2)
	// A last line without its newline is left for the next read.
	partial := auditLine("h", "ResponseComplete", "update", n2, "leases", "", "/x", t1)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(lines + strings.TrimSuffix(partial, "\n"))
	if err := a.Read(); err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{n1: true, n2: true}
	from, _ := time.Parse(time.RFC3339, "2026-01-01T00:00:10Z")
	to, _ := time.Parse(time.RFC3339, "2026-01-01T00:01:00Z")
	want := Counts{"update leases": 1, "patch nodes/status": 1, "watch pods": 2, "get /version": 1}
	if got := a.Requests(users, from, to); !equalCounts(got, want) {
		t.Errorf("Requests = %v, want %v", got, want)
	}
	if got := a.OpenWatches(users); !equalCounts(got, Counts{"watch pods": 1}) {
		t.Errorf("OpenWatches = %v, want one watch of pods (d completed)", got)
	}
	if got := a.Requests(map[string]bool{n2: true}, from, to); !equalCounts(got, Counts{"watch pods": 1, "get /version": 1}) {
		t.Errorf("Requests of %s = %v", n2, got)
	}
	f.WriteString("\n")
	f.Close()
	if err := a.Read(); err != nil {
		t.Fatal(err)
	}
	if got := a.Requests(users, from, to)["update leases"]; got != 2 {
		t.Errorf("after the rest of the last line: update leases = %v, want 2", got)
	}
}

func TestAudit_ReadBadLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	os.WriteFile(path, nil, 0o644)
	a, err := NewAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte("{not json\n"), 0o644)
	if err := a.Read(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Read of a bad line: %v, want an error naming %s", err, path)
	}
	if _, err := NewAudit(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("NewAudit of a missing file succeeded")
	}
}

func TestCounts_Top(t *testing.T) {
	c := Counts{"a": 1, "b": 3, "c": 3, "d": 2}
	for _, tc := range []struct {
		n    int
		want string
	}{{2, "b c"}, {10, "b c d a"}, {0, ""}} {
		if got := strings.Join(c.Top(tc.n), " "); got != tc.want {
			t.Errorf("Top(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := c.Scale(0.5).Total(); got != 4.5 {
		t.Errorf("Scale(0.5).Total() = %v, want 4.5", got)
	}
}

func equalCounts(a, b Counts) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// withCode gives an audit line a response status.
func withCode(line string, code int) string {
	return strings.Replace(line, `,"requestReceivedTimestamp"`, fmt.Sprintf(`,"responseStatus":{"metadata":{},"code":%d},"requestReceivedTimestamp"`, code), 1)
}

func TestAudit_Refused(t *testing.T) {
	const (
		n1 = "system:node:wasmlet-000"
		t1 = "2026-01-01T00:00:30.000000Z"
	)
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := NewAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	token := "/api/v1/namespaces/default/serviceaccounts/default/token"
	lines := withCode(auditLine("a", "ResponseComplete", "create", n1, "serviceaccounts", "token", token, t1), 403) +
		withCode(auditLine("b", "ResponseComplete", "create", n1, "serviceaccounts", "token", token, t1), 201) +
		withCode(auditLine("c", "ResponseComplete", "create", n1, "serviceaccounts", "token", token, t1), 403) +
		// A watch refused at its start, and one that started and ended.
		withCode(auditLine("d", "ResponseComplete", "watch", n1, "configmaps", "", "/api/v1/configmaps?watch=true", t1), 403) +
		withCode(auditLine("e", "ResponseStarted", "watch", n1, "pods", "", "/api/v1/pods?watch=true", t1), 200) +
		withCode(auditLine("e", "ResponseComplete", "watch", n1, "pods", "", "/api/v1/pods?watch=true", t1), 200) +
		// A request still running has no code yet.
		auditLine("f", "ResponseStarted", "watch", n1, "nodes", "", "/api/v1/nodes?watch=true", t1)
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Read(); err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{n1: true}
	from, _ := time.Parse(time.RFC3339, "2026-01-01T00:00:10Z")
	to, _ := time.Parse(time.RFC3339, "2026-01-01T00:01:00Z")
	want := Counts{"create serviceaccounts/token 403": 2, "watch configmaps 403": 1}
	if got := a.Refused(users, from, to); !equalCounts(got, want) {
		t.Errorf("Refused = %v, want %v", got, want)
	}
	if got := a.Requests(users, from, to).Total(); got != 6 {
		t.Errorf("Requests total = %v, want 6 (refused ones counted too)", got)
	}
}
