package pluginhost

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestHostAllowed(t *testing.T) {
	tests := []struct {
		allowed []string
		url     string
		want    bool
	}{
		{nil, "http://a.example.com/", false},
		{[]string{"a.example.com"}, "http://a.example.com/x", true},
		{[]string{"a.example.com"}, "https://a.example.com:8443/x", true},
		{[]string{"a.example.com"}, "http://b.example.com/", false},
		{[]string{"a.example.com:8080"}, "http://a.example.com:8080/", true},
		{[]string{"a.example.com:8080"}, "http://a.example.com/", false},
		{[]string{"a.example.com:443"}, "https://a.example.com/", true},
		{[]string{"*.example.com"}, "http://deep.a.example.com/", true},
		{[]string{"*.example.com"}, "http://example.com/", false},
		{[]string{"*.example.com"}, "http://evilexample.com/", false},
		{[]string{"*.example.com:80"}, "http://a.example.com:81/", false},
		{[]string{"A.Example.com"}, "http://a.EXAMPLE.com/", true},
		{[]string{"127.0.0.1"}, "http://127.0.0.1:9999/", true},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := hostAllowed(tt.allowed, u); got != tt.want {
			t.Errorf("hostAllowed(%v, %s) = %v, want %v", tt.allowed, tt.url, got, tt.want)
		}
	}
}

// TestHost_HTTPRequest calls http_request from the Go guest: an allowed host
// answers (through result_read, the guest's buffer being too small); any
// other host is denied without a request being made.
func TestHost_HTTPRequest(t *testing.T) {
	hits, otherHits := 0, 0
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits++ }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path == "/redirect" {
			// 127.0.0.1 is allowed, localhost is not: the redirect must fail.
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1), http.StatusFound)
			return
		}
		fmt.Fprint(w, "hello from the allowed host, long enough for result_read")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	tests := []struct {
		name, allowed, path, reason string
		hits                        int
	}{
		{"allowed", u.Host, "/x", "200", 1},
		{"denied", "other.example.com", "/x", "-2", 0},
		{"redirect to a denied host", u.Host, "/redirect", "0", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits = 0
			dir := t.TempDir()
			mf := writePlugin(t, dir, "web", goGuest(t), "1", "config: {url: '"+srv.URL+tt.path+"'}\npermissions: {allowedHosts: ['"+tt.allowed+"']}\n")
			p, err := Load(context.Background(), LoadConfig{Path: mf, Config: Config{CacheDir: testCacheDir(t), Timeout: 5 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			r, err := p.Admit(context.Background(), admitReq(`"http"`))
			if err != nil || r.Reason != tt.reason || hits != tt.hits {
				t.Fatalf("Admit = %+v, %v, %d requests; want reason %q and %d requests", r, err, hits, tt.reason, tt.hits)
			}
			if tt.path == "/x" && tt.hits == 1 && r.Message != "hello from the allowed host, long enough for result_read" {
				t.Fatalf("body = %q", r.Message)
			}
			if tt.path == "/redirect" && (otherHits != 0 || !strings.Contains(r.Message, "not in allowedHosts")) {
				t.Fatalf("redirect: message %q, %d requests reached the other host", r.Message, otherHits)
			}
		})
	}
}
