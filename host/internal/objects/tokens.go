package objects

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// firstTokenHold is how old a registered pod must be before its first
// token is asked for. The Node authorizer and NodeRestriction learn that a
// pod is bound to the node from the API server's own informer, which can
// be an instant behind the node's watch of its pods; the kubelet asks
// after its volume manager's loops (100 ms each) have run, wasmlet as soon
// as it syncs the pod, and without a hold one wasmlet token request in five
// was refused so. A pod registered longer ago (a restart, a refresh) does
// not wait.
const firstTokenHold = 100 * time.Millisecond

// forbiddenRetries are the waits before asking again for a pod's first
// token when the API server refused it as forbidden: the race
// firstTokenHold describes, lost anyway. They are short beside the pod
// sync's own retry (a second); a refusal that outlasts them (the pod
// really is not the node's) is returned.
var forbiddenRetries = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}

// maxTokenAge is the age past which a cached token is refreshed whatever
// its lifetime, as the kubelet's token manager does.
const maxTokenAge = 24 * time.Hour

// tokenKey identifies a cached token.
type tokenKey struct {
	namespace      string
	serviceAccount string
	audience       string
	expiration     int64
	podUID         types.UID
}

// cachedToken is a token with when it was requested and when it expires.
type cachedToken struct {
	token   string
	issued  time.Time // by the local clock, when it was requested
	expires time.Time // the API server's ExpirationTimestamp
}

// needsRefresh reports whether t is past 80 % of its lifetime (issued to
// expires) or older than maxTokenAge at now. Unlike the kubelet it adds
// no random jitter, so that refreshes are predictable.
func (t cachedToken) needsRefresh(now time.Time) bool {
	if !now.Before(t.issued.Add(maxTokenAge)) {
		return true
	}
	life := t.expires.Sub(t.issued)
	return !now.Before(t.issued.Add(life * 8 / 10))
}

// expired reports whether t can no longer be used at now.
func (t cachedToken) expired(now time.Time) bool {
	return !now.Before(t.expires)
}

// serviceAccountName is the service account pod runs as.
func serviceAccountName(pod *v1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// Token returns a token of req.Pod's service account bound to the pod,
// for req.Audience (none: the API server's audiences) and lasting
// req.ExpirationSeconds (0: the API server's default, an hour). A cached
// token is returned until it needs a refresh (see Tokens); if a refresh
// fails while the cached token is still valid, the error is logged and
// the cached token returned.
func (c *Cluster) Token(ctx context.Context, req TokenRequest) (Token, error) {
	pod := req.Pod
	if pod == nil {
		return Token{}, errors.New("service account token: no pod in the request")
	}
	sa := serviceAccountName(pod)
	what := fmt.Sprintf("service account token for pod %s/%s (serviceaccount %s)", pod.Namespace, pod.Name, sa)
	if c.client == nil {
		return Token{}, fmt.Errorf("%s: %w", what, errNoClient)
	}
	key := tokenKey{pod.Namespace, sa, req.Audience, req.ExpirationSeconds, pod.UID}

	now := c.now()
	c.tokMu.Lock()
	cached, ok := c.tokens[key]
	c.tokMu.Unlock()
	if ok && !cached.needsRefresh(now) {
		return Token{Token: cached.token, Expires: cached.expires}, nil
	}

	if !ok {
		c.mu.Lock()
		arrived, seen := c.arrived[pod.UID]
		c.mu.Unlock()
		if hold := firstTokenHold - now.Sub(arrived); seen && hold > 0 {
			if err := c.wait(ctx, hold); err != nil {
				return Token{}, fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	tr := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
			},
		},
	}
	if req.Audience != "" {
		tr.Spec.Audiences = []string{req.Audience}
	}
	if req.ExpirationSeconds > 0 {
		exp := req.ExpirationSeconds
		tr.Spec.ExpirationSeconds = &exp
	}
	got, err := c.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	for i := 0; !ok && apierrors.IsForbidden(err) && i < len(forbiddenRetries); i++ {
		if c.wait(ctx, forbiddenRetries[i]) != nil {
			break
		}
		got, err = c.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	}
	if err == nil && (got == nil || got.Status.Token == "") {
		err = errors.New("the API server returned no token")
	}
	if err == nil && !got.Status.ExpirationTimestamp.After(now) {
		err = fmt.Errorf("the API server returned a token expiring at %s, not after now (%s)",
			got.Status.ExpirationTimestamp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if err != nil {
		if ok && !cached.expired(c.now()) {
			c.log.Error("cannot refresh "+what+"; using the cached token", "error", err, "expires", cached.expires)
			return Token{Token: cached.token, Expires: cached.expires}, nil
		}
		return Token{}, fmt.Errorf("%s: %w", what, err)
	}

	t := cachedToken{token: got.Status.Token, issued: now, expires: got.Status.ExpirationTimestamp.Time}
	c.tokMu.Lock()
	c.tokens[key] = t
	for k, old := range c.tokens { // drop what has expired
		if old.expired(now) {
			delete(c.tokens, k)
		}
	}
	c.tokMu.Unlock()
	return Token{Token: t.token, Expires: t.expires}, nil
}

// ForgetPod drops the tokens cached for the pod with uid.
func (c *Cluster) ForgetPod(uid string) {
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	for k := range c.tokens {
		if string(k.podUID) == uid {
			delete(c.tokens, k)
		}
	}
}

// tokenCount is how many tokens are cached (for tests).
func (c *Cluster) tokenCount() int {
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	return len(c.tokens)
}

// sleep waits d or until ctx ends, whichever is first; it returns ctx's
// error if ctx ended.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
