package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// Audit follows the API server's audit log (JSON lines, audit.k8s.io/v1
// Events at level Metadata for the group system:nodes, RequestReceived
// omitted): each Read takes the lines appended since the last.
type Audit struct {
	path   string
	offset int64
	// requests are the requests of nodes, one per audit ID, in the order
	// their first stage was read.
	requests []Request
	// seen is each audit ID's index in requests.
	seen map[string]int
	// open are the watches started and not completed, by audit ID.
	open map[string]Request
}

// Request is one API request of a node as the audit log has it.
type Request struct {
	// User is the node's user name, system:node:NAME.
	User string
	// Key is the verb and the resource (with its subresource), e.g.
	// "patch nodes/status", or the verb and the path of a non-resource
	// request.
	Key string
	// Received is when the API server received it.
	Received time.Time
	// Code is the response's status code once the request completed (0
	// before; a watch's is its start's).
	Code int
}

// auditEvent is what the benchmark reads of an audit Event.
type auditEvent struct {
	AuditID    string    `json:"auditID"`
	Stage      string    `json:"stage"`
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// NewAudit follows the audit log at path from its current end.
func NewAudit(path string) (*Audit, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Audit{path: path, offset: fi.Size(), seen: map[string]int{}, open: map[string]Request{}}, nil
}

// Read takes the complete lines appended to the log since the last Read.
func (a *Audit) Read() error {
	f, err := os.Open(a.path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return fmt.Errorf("audit log %s: %w", a.path, err)
	}
	n, err := a.consume(f)
	a.offset += n
	if err != nil {
		return fmt.Errorf("audit log %s at byte %d: %w", a.path, a.offset, err)
	}
	return nil
}

// consume reads whole lines from r and returns how many bytes they took; a
// last line without its newline is left for the next read.
func (a *Audit) consume(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var n int64
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += int64(len(line))
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return n, fmt.Errorf("an event: %w", err)
		}
		a.add(e)
	}
}

// add records one event of a node.
func (a *Audit) add(e auditEvent) {
	if !strings.HasPrefix(e.User.Username, "system:node:") {
		return
	}
	req := Request{User: e.User.Username, Key: requestKey(e), Received: e.Received}
	i, ok := a.seen[e.AuditID]
	if !ok {
		i = len(a.requests)
		a.seen[e.AuditID] = i
		a.requests = append(a.requests, req)
	}
	if e.ResponseStatus != nil && (e.Stage == "ResponseComplete" || e.Stage == "Panic") {
		a.requests[i].Code = e.ResponseStatus.Code
	}
	if e.Verb == "watch" {
		switch e.Stage {
		case "ResponseStarted":
			a.open[e.AuditID] = req
		case "ResponseComplete", "Panic":
			delete(a.open, e.AuditID)
		}
	}
}

// requestKey is the verb and what it acts on.
func requestKey(e auditEvent) string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		p := e.RequestURI
		if u, err := url.Parse(e.RequestURI); err == nil {
			p = u.Path
		}
		return e.Verb + " " + p
	}
	if e.ObjectRef.Subresource != "" {
		return e.Verb + " " + e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + e.ObjectRef.Resource
}

// Counts is a number per request key.
type Counts map[string]float64

// Total is the sum over every key.
func (c Counts) Total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// Top is the keys by count, largest first (ties by key), at most n.
func (c Counts) Top(n int) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	return keys
}

// Scale is every count multiplied by f.
func (c Counts) Scale(f float64) Counts {
	out := Counts{}
	for k, v := range c {
		out[k] = v * f
	}
	return out
}

// Requests counts the requests of the users in users received in
// [from, to), by key.
func (a *Audit) Requests(users map[string]bool, from, to time.Time) Counts {
	out := Counts{}
	for _, r := range a.requests {
		if users[r.User] && !r.Received.Before(from) && r.Received.Before(to) {
			out[r.Key]++
		}
	}
	return out
}

// Refused counts the requests of the users in users received in [from,
// to) that the API server answered with a status of 400 or more, by key
// and status ("create serviceaccounts/token 403").
func (a *Audit) Refused(users map[string]bool, from, to time.Time) Counts {
	out := Counts{}
	for _, r := range a.requests {
		if users[r.User] && r.Code >= 400 && !r.Received.Before(from) && r.Received.Before(to) {
			out[fmt.Sprintf("%s %d", r.Key, r.Code)]++
		}
	}
	return out
}

// OpenWatches counts the watches of the users in users that started and
// have not ended, by key.
func (a *Audit) OpenWatches(users map[string]bool) Counts {
	out := Counts{}
	for _, r := range a.open {
		if users[r.User] {
			out[r.Key]++
		}
	}
	return out
}
