package kubeletapi

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
)

// refusals logs the requests the server refuses, with the reason, at
// warn: a few at once, then one every 10 s, each saying how many were left
// out since the last, so a client retrying in a loop does not flood the
// log.
type refusals struct {
	log     hclog.Logger
	limit   *rate.Limiter
	x509    bool   // a client CA is configured
	caName  string // where it comes from
	mu      sync.Mutex
	dropped int
}

func newRefusals(log hclog.Logger) *refusals {
	return &refusals{log: log, limit: rate.NewLimiter(rate.Every(10*time.Second), 5)}
}

// note logs a refused request with its status and reason.
func (f *refusals) note(r *http.Request, user string, code int, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.limit.Allow() {
		f.dropped++
		return
	}
	args := []any{"status", code, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", reason}
	if user != "" {
		args = append(args, "user", user)
	}
	if f.dropped > 0 {
		args = append(args, "refusals_not_logged", f.dropped)
		f.dropped = 0
	}
	f.log.Warn("kubelet API request refused", args...)
}

// unauthenticated is why a request found no identity: the
// authenticator's error, or what the request brought and the server
// cannot check.
func (f *refusals) unauthenticated(r *http.Request, err error) string {
	cert := r.TLS != nil && len(r.TLS.PeerCertificates) > 0
	token := r.Header.Get("Authorization") != ""
	switch {
	case err != nil:
		return "authentication failed: " + err.Error()
	case cert && f.x509:
		c := r.TLS.PeerCertificates[0]
		return fmt.Sprintf("the client certificate (subject %q, issuer %q) was not verified by the client CA (%s)", c.Subject.String(), c.Issuer.String(), f.caName)
	case token:
		return "the bearer token was not accepted (TokenReview off, or the token is not valid)"
	case f.x509:
		// A TLS client sends a certificate only when one of its issuers is
		// among the CAs the server names.
		return fmt.Sprintf("no client certificate issued by the client CA (%s) and no bearer token, and anonymous requests are not allowed", f.caName)
	default:
		return "no client CA is configured (--client-ca-file, or the cluster CA of --kubeconfig), so client certificates are not asked for; no bearer token, and anonymous requests are not allowed"
	}
}
