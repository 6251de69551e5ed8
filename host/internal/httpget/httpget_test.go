package httpget

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serve starts a server and returns its IP and a container whose port
// "web" is the server's.
func serve(t *testing.T, h http.HandlerFunc) (string, *v1.Container) {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	host, port, _ := net.SplitHostPort(u.Host)
	n, _ := strconv.Atoi(port)
	return host, &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(n)}}}
}

func TestDo(t *testing.T) {
	ip, c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			w.Write([]byte(r.Host + " " + r.Header.Get("User-Agent") + " " + r.Header.Get("Accept") + " " + r.Header.Get("X-Test")))
		case "/here":
			http.Redirect(w, r, "/echo", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 100)))
		default:
			http.Error(w, "no", http.StatusInternalServerError)
		}
	})
	for _, tc := range []struct {
		name       string
		action     v1.HTTPGetAction
		wantStatus int
		wantBody   string
	}{
		{"headers", v1.HTTPGetAction{Path: "echo", Port: intstr.FromString("web"), HTTPHeaders: []v1.HTTPHeader{{Name: "Host", Value: "example.org"}, {Name: "X-Test", Value: "1"}}}, 200, "example.org test/1 */* 1"},
		{"same host redirect followed", v1.HTTPGetAction{Path: "/here", Port: intstr.FromString("web")}, 200, ip + ":"},
		{"redirect elsewhere not followed", v1.HTTPGetAction{Path: "/away", Port: intstr.FromString("web")}, 302, "<a href=\"http://elsewhere.invalid/\">Found</a>.\n\n"},
		{"body limited", v1.HTTPGetAction{Path: "/big", Port: intstr.FromString("web")}, 200, strings.Repeat("x", 10)},
		{"error status is a response", v1.HTTPGetAction{Path: "/fail", Port: intstr.FromString("web")}, 500, "no\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxBody := int64(1 << 10)
			if tc.name == "body limited" {
				maxBody = 10
			}
			resp, err := Do(context.Background(), Request{Action: &tc.action, Container: c, PodIP: ip, UserAgent: "test/1", Timeout: 10 * time.Second, MaxBody: maxBody})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if resp.Redirected() != (tc.wantStatus == 302) {
				t.Errorf("Redirected() = %v for status %d", resp.Redirected(), resp.StatusCode)
			}
			body := string(resp.Body)
			if tc.name == "same host redirect followed" {
				body, _, _ = strings.Cut(body, ":") // the server's port varies
				body += ":"
			}
			if body != tc.wantBody {
				t.Errorf("body %q, want %q", resp.Body, tc.wantBody)
			}
		})
	}
}

func TestDo_BadPort(t *testing.T) {
	_, err := Do(context.Background(), Request{Action: &v1.HTTPGetAction{Port: intstr.FromString("none")}, Container: &v1.Container{Name: "app"}, PodIP: "127.0.0.1", Timeout: time.Second, MaxBody: 10})
	if err == nil || err.Error() != "couldn't find port: none in app" {
		t.Errorf("Do with an unknown port: %v", err)
	}
}

func TestURL(t *testing.T) {
	c := &v1.Container{Name: "app"}
	for _, tc := range []struct {
		action v1.HTTPGetAction
		want   string
	}{
		{v1.HTTPGetAction{Port: intstr.FromInt32(80)}, "http://10.0.0.1:80/"},
		{v1.HTTPGetAction{Host: "h", Path: "p?q=1", Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt32(443)}, "https://h:443/p?q=1"},
		{v1.HTTPGetAction{Host: "fd00::1", Path: "/x", Port: intstr.FromString("8080")}, "http://[fd00::1]:8080/x"},
	} {
		u, err := URL(&tc.action, c, "10.0.0.1")
		if err != nil || u.String() != tc.want {
			t.Errorf("URL(%+v) = %v, %v; want %s", tc.action, u, err, tc.want)
		}
	}
}
