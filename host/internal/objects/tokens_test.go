package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// tokenServer is a fake TokenRequest API: it issues "tok-N" tokens that
// expire ExpirationSeconds (3600 when unset) after its clock, records the
// requests, and fails while fail is set.
type tokenServer struct {
	mu       sync.Mutex
	now      time.Time
	fail     bool
	forbid   int // how many of the next requests are refused as forbidden
	requests []*authenticationv1.TokenRequest
	names    []string // service account, namespace/name
}

func (s *tokenServer) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *tokenServer) advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
}

func (s *tokenServer) setFail(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

func (s *tokenServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *tokenServer) react(action k8stesting.Action) (bool, runtime.Object, error) {
	ca, ok := action.(k8stesting.CreateActionImpl)
	if !ok || ca.GetSubresource() != "token" {
		return false, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return true, nil, errors.New("apiserver unavailable")
	}
	req := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
	s.requests = append(s.requests, req)
	s.names = append(s.names, ca.GetNamespace()+"/"+ca.Name)
	if s.forbid > 0 {
		s.forbid--
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, ca.Name,
			errors.New("no relationship found between node 'n1' and this object"))
	}
	exp := int64(3600)
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	resp := req.DeepCopy()
	resp.Status = authenticationv1.TokenRequestStatus{
		Token:               fmt.Sprintf("tok-%d", len(s.requests)),
		ExpirationTimestamp: metav1.NewTime(s.now.Add(time.Duration(exp) * time.Second)),
	}
	return true, resp, nil
}

func newTokenCluster(t *testing.T) (*Cluster, *tokenServer) {
	t.Helper()
	srv := &tokenServer{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", srv.react)
	c := NewCluster(ClusterConfig{Client: client})
	c.now = srv.clock
	return c, srv
}

func tokenPod(uid, sa string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec:       v1.PodSpec{ServiceAccountName: sa},
	}
}

func mustToken(t *testing.T, c *Cluster, req TokenRequest) Token {
	t.Helper()
	tok, err := c.Token(context.Background(), req)
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return tok
}

func TestTokenRequestShape(t *testing.T) {
	c, srv := newTokenCluster(t)
	tok := mustToken(t, c, TokenRequest{Pod: tokenPod("u1", "runner"), Audience: "vault", ExpirationSeconds: 7200})
	if tok.Token != "tok-1" || !tok.Expires.Equal(srv.clock().Add(2*time.Hour)) {
		t.Errorf("token = %+v", tok)
	}
	req := srv.requests[0]
	if srv.names[0] != "team/runner" {
		t.Errorf("requested for %s, want team/runner", srv.names[0])
	}
	if len(req.Spec.Audiences) != 1 || req.Spec.Audiences[0] != "vault" {
		t.Errorf("audiences = %q", req.Spec.Audiences)
	}
	if req.Spec.ExpirationSeconds == nil || *req.Spec.ExpirationSeconds != 7200 {
		t.Errorf("expirationSeconds = %v", req.Spec.ExpirationSeconds)
	}
	want := authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "pod-u1", UID: "u1"}
	if req.Spec.BoundObjectRef == nil || *req.Spec.BoundObjectRef != want {
		t.Errorf("boundObjectRef = %+v, want %+v", req.Spec.BoundObjectRef, want)
	}

	// No audience: the API server's; no service account: "default".
	mustToken(t, c, TokenRequest{Pod: tokenPod("u1", ""), ExpirationSeconds: 3600})
	if req := srv.requests[1]; len(req.Spec.Audiences) != 0 || srv.names[1] != "team/default" {
		t.Errorf("second request: audiences %q for %s", req.Spec.Audiences, srv.names[1])
	}
	if _, err := c.Token(context.Background(), TokenRequest{}); err == nil {
		t.Error("Token without a pod succeeded")
	}
}

func TestTokenCacheAndRefresh(t *testing.T) {
	c, srv := newTokenCluster(t)
	req := TokenRequest{Pod: tokenPod("u1", "runner"), Audience: "api", ExpirationSeconds: 3600}

	if tok := mustToken(t, c, req); tok.Token != "tok-1" {
		t.Fatalf("first token = %q", tok.Token)
	}
	srv.advance(2879 * time.Second) // just under 80 % of the hour
	if tok := mustToken(t, c, req); tok.Token != "tok-1" {
		t.Fatalf("token before 80%% of its lifetime = %q, want the cached tok-1", tok.Token)
	}
	if srv.count() != 1 {
		t.Fatalf("%d requests, want 1", srv.count())
	}
	// Other audiences, lifetimes and pods are cached apart.
	other := mustToken(t, c, TokenRequest{Pod: req.Pod, Audience: "other", ExpirationSeconds: 3600})
	longer := mustToken(t, c, TokenRequest{Pod: req.Pod, Audience: "api", ExpirationSeconds: 7200})
	pod2 := mustToken(t, c, TokenRequest{Pod: tokenPod("u2", "runner"), Audience: "api", ExpirationSeconds: 3600})
	if other.Token != "tok-2" || longer.Token != "tok-3" || pod2.Token != "tok-4" {
		t.Fatalf("tokens for other keys = %q %q %q", other.Token, longer.Token, pod2.Token)
	}

	srv.advance(time.Second) // at 80 %
	tok := mustToken(t, c, req)
	if tok.Token != "tok-5" || !tok.Expires.Equal(srv.clock().Add(time.Hour)) {
		t.Fatalf("token at 80%% of its lifetime = %+v, want a new tok-5", tok)
	}
	if tok := mustToken(t, c, req); tok.Token != "tok-5" {
		t.Fatalf("token right after refresh = %q, want tok-5", tok.Token)
	}
}

func TestTokenRefreshAfterADay(t *testing.T) {
	c, srv := newTokenCluster(t)
	req := TokenRequest{Pod: tokenPod("u1", ""), ExpirationSeconds: 7 * 24 * 3600}
	mustToken(t, c, req)
	srv.advance(24*time.Hour - time.Second)
	if tok := mustToken(t, c, req); tok.Token != "tok-1" {
		t.Fatalf("token under a day old = %q, want tok-1", tok.Token)
	}
	srv.advance(time.Second)
	if tok := mustToken(t, c, req); tok.Token != "tok-2" {
		t.Fatalf("token a day old = %q, want a new tok-2", tok.Token)
	}
}

func TestTokenRefreshFailure(t *testing.T) {
	c, srv := newTokenCluster(t)
	req := TokenRequest{Pod: tokenPod("u1", "runner"), ExpirationSeconds: 3600}
	mustToken(t, c, req)

	srv.setFail(true)
	srv.advance(50 * time.Minute) // refresh due, token still valid
	if tok := mustToken(t, c, req); tok.Token != "tok-1" {
		t.Fatalf("token while refresh fails = %q, want the cached tok-1", tok.Token)
	}
	srv.advance(10 * time.Minute) // expired
	_, err := c.Token(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "team/pod-u1") || !strings.Contains(err.Error(), "apiserver unavailable") {
		t.Fatalf("error with an expired token = %v, want one naming the pod and the cause", err)
	}

	srv.setFail(false)
	if tok := mustToken(t, c, req); tok.Token != "tok-2" {
		t.Fatalf("token after recovery = %q, want tok-2", tok.Token)
	}
}

func TestTokenForgetPod(t *testing.T) {
	c, srv := newTokenCluster(t)
	r1 := TokenRequest{Pod: tokenPod("u1", ""), ExpirationSeconds: 3600}
	r2 := TokenRequest{Pod: tokenPod("u2", ""), ExpirationSeconds: 3600}
	mustToken(t, c, r1)
	mustToken(t, c, TokenRequest{Pod: r1.Pod, Audience: "x", ExpirationSeconds: 3600})
	mustToken(t, c, r2)
	if n := c.tokenCount(); n != 3 {
		t.Fatalf("tokenCount = %d, want 3", n)
	}
	c.ForgetPod("u1")
	if n := c.tokenCount(); n != 1 {
		t.Fatalf("after ForgetPod: tokenCount = %d, want 1", n)
	}
	if tok := mustToken(t, c, r1); tok.Token != "tok-4" {
		t.Errorf("token after ForgetPod = %q, want a new one", tok.Token)
	}
	if tok := mustToken(t, c, r2); tok.Token != "tok-3" {
		t.Errorf("other pod's token = %q, want the cached tok-3", tok.Token)
	}
	if srv.count() != 4 {
		t.Errorf("%d requests, want 4", srv.count())
	}
}

// waits records Token's waits between attempts, without waiting.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err()
}

func (w *waits) got() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

func TestTokenForbiddenFirstRequest(t *testing.T) {
	req := TokenRequest{Pod: tokenPod("u1", "runner"), ExpirationSeconds: 3600}
	setup := func(t *testing.T, forbid int) (*Cluster, *tokenServer, *waits) {
		c, srv := newTokenCluster(t)
		w := &waits{}
		c.wait = w.wait
		srv.forbid = forbid
		return c, srv, w
	}

	t.Run("the authorizer catches up", func(t *testing.T) {
		c, srv, w := setup(t, 2)
		if tok := mustToken(t, c, req); tok.Token != "tok-3" || srv.count() != 3 {
			t.Fatalf("token = %q after %d requests, want tok-3 after 3", tok.Token, srv.count())
		}
		if got, want := w.got(), forbiddenRetries[:2]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("waits = %v, want %v", got, want)
		}
	})
	t.Run("refused for good", func(t *testing.T) {
		c, srv, w := setup(t, 100)
		_, err := c.Token(context.Background(), req)
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "team/pod-u1") {
			t.Fatalf("error = %v, want a Forbidden one naming the pod", err)
		}
		if n := srv.count(); n != 1+len(forbiddenRetries) {
			t.Errorf("%d requests, want %d", n, 1+len(forbiddenRetries))
		}
		if got := w.got(); fmt.Sprint(got) != fmt.Sprint(forbiddenRetries) {
			t.Errorf("waits = %v, want %v", got, forbiddenRetries)
		}
	})
	t.Run("the context ends while waiting", func(t *testing.T) {
		c, srv, _ := setup(t, 100)
		ctx, cancel := context.WithCancel(context.Background())
		c.wait = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
		if _, err := c.Token(ctx, req); err == nil {
			t.Fatal("Token succeeded")
		}
		if n := srv.count(); n != 1 {
			t.Errorf("%d requests, want 1 (no more once the context ended)", n)
		}
	})
	t.Run("other errors are not retried", func(t *testing.T) {
		c, srv, w := setup(t, 0)
		srv.setFail(true)
		if _, err := c.Token(context.Background(), req); err == nil {
			t.Fatal("Token succeeded")
		}
		if got := w.got(); len(got) != 0 {
			t.Errorf("waits = %v, want none", got)
		}
	})
	t.Run("a refresh with a valid token is not retried", func(t *testing.T) {
		c, srv, w := setup(t, 0)
		mustToken(t, c, req)
		srv.advance(50 * time.Minute)
		srv.mu.Lock()
		srv.forbid = 100
		srv.mu.Unlock()
		if tok := mustToken(t, c, req); tok.Token != "tok-1" {
			t.Fatalf("token = %q, want the cached tok-1", tok.Token)
		}
		if n := srv.count(); n != 2 {
			t.Errorf("%d requests, want 2 (the first, one refresh)", n)
		}
		if got := w.got(); len(got) != 0 {
			t.Errorf("waits = %v, want none", got)
		}
	})
}

func TestTokenFirstHold(t *testing.T) {
	c, srv := newTokenCluster(t)
	w := &waits{}
	c.wait = w.wait
	fresh := tokenPod("u1", "")
	c.RegisterPod(fresh)
	srv.advance(30 * time.Millisecond)
	mustToken(t, c, TokenRequest{Pod: fresh, ExpirationSeconds: 3600})
	if got := w.got(); len(got) != 1 || got[0] != firstTokenHold-30*time.Millisecond {
		t.Fatalf("waits before a pod's first token 30 ms after it arrived = %v, want [%s]", got, firstTokenHold-30*time.Millisecond)
	}
	// Its refresh, a pod registered long ago and a pod never registered
	// do not wait.
	srv.advance(50 * time.Minute)
	mustToken(t, c, TokenRequest{Pod: fresh, ExpirationSeconds: 3600})
	old := tokenPod("u2", "")
	c.RegisterPod(old)
	srv.advance(time.Second)
	mustToken(t, c, TokenRequest{Pod: old, ExpirationSeconds: 3600})
	mustToken(t, c, TokenRequest{Pod: tokenPod("u3", ""), ExpirationSeconds: 3600})
	if got := w.got(); len(got) != 1 {
		t.Errorf("waits = %v, want only the first", got)
	}
	if n := srv.count(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	// Unregistered and registered again: a new arrival.
	c.UnregisterPod(old)
	c.ForgetPod("u2")
	c.RegisterPod(old)
	mustToken(t, c, TokenRequest{Pod: old, ExpirationSeconds: 3600})
	if got := w.got(); len(got) != 2 || got[1] != firstTokenHold {
		t.Errorf("waits = %v, want a second of %s for the pod registered again", got, firstTokenHold)
	}
}
