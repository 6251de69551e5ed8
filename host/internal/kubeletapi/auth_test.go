package kubeletapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestRequestAttributes(t *testing.T) {
	tests := []struct {
		method, path string
		verb         string
		subresources []string
	}{
		{"GET", "/containerLogs/ns/pod/c", "get", []string{"proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/ping", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthzx", "get", []string{"proxy"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/cadvisor", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/logs/", "get", []string{"log"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"GET", "/logsx", "get", []string{"proxy"}},
		{"POST", "/checkpoint/ns/pod/c", "create", []string{"checkpoint"}},
		{"POST", "/exec/ns/pod/c", "create", []string{"proxy"}},
		{"GET", "/exec/ns/pod/c", "get", []string{"proxy"}},
		{"POST", "/attach/ns/pod/c", "create", []string{"proxy"}},
		{"POST", "/portForward/ns/pod", "create", []string{"proxy"}},
		{"POST", "/run/ns/pod/c", "create", []string{"proxy"}},
		{"PUT", "/x", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/x", "delete", []string{"proxy"}},
		{"HEAD", "/x", "", []string{"proxy"}},
		{"OPTIONS", "/", "", []string{"proxy"}},
	}
	u := &user.DefaultInfo{Name: "alice"}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		attrs := requestAttributes(u, r, "node-a")
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.GetSubresource())
			if a.GetVerb() != tt.verb || a.GetResource() != "nodes" || a.GetName() != "node-a" || a.GetAPIVersion() != "v1" ||
				a.GetAPIGroup() != "" || a.GetNamespace() != "" || !a.IsResourceRequest() || a.GetPath() != tt.path || a.GetUser() != u {
				t.Errorf("%s %s: attributes %+v", tt.method, tt.path, a)
			}
		}
		if !reflect.DeepEqual(subs, tt.subresources) {
			t.Errorf("%s %s: subresources %v, want %v", tt.method, tt.path, subs, tt.subresources)
		}
	}
}

// A bearer token is checked by TokenReview and the answer cached for
// Caches.Token; NoTokenReview leaves tokens unauthenticated.
func TestServer_tokenReview(t *testing.T) {
	for _, tt := range []struct {
		name      string
		noReview  bool
		ttl       time.Duration
		wantCode  int
		wantCalls int32
	}{
		{"cached", false, 0, 200, 1},
		{"cache of a nanosecond", false, time.Nanosecond, 200, 2},
		{"token review off", true, 0, 401, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			// The API server's TokenReview: "good" is carol.
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var tr authenticationv1.TokenReview
				if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" || json.NewDecoder(r.Body).Decode(&tr) != nil {
					http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
					return
				}
				calls.Add(1)
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: tr.Spec.Token == "good", User: authenticationv1.UserInfo{Username: "carol"}}
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(&tr)
			}))
			defer api.Close()
			client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
			if err != nil {
				t.Fatal(err)
			}
			e := startServer(t, nil, func(c *Config) {
				c.Client, c.NoTokenReview, c.Caches.Token = client, tt.noReview, tt.ttl
			})
			c := e.client(t, "")
			for i := 0; i < 2; i++ {
				req, _ := http.NewRequest(http.MethodGet, "https://"+e.addr+"/healthz", nil)
				req.Header.Set("Authorization", "Bearer good")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.wantCode {
					t.Errorf("request %d: %d, want %d", i, resp.StatusCode, tt.wantCode)
				}
				if tt.ttl > 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("%d TokenReviews, want %d", got, tt.wantCalls)
			}
		})
	}
}
