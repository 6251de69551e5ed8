package kubeletapi

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// The kubelet's defaults for its webhook caches (KubeletConfiguration
// authentication.webhook.cacheTTL and authorization.webhook.cache*TTL).
const (
	tokenCacheTTL      = 2 * time.Minute
	authorizedCacheTTL = 5 * time.Minute
	deniedCacheTTL     = 30 * time.Second
)

// webhookRetryBackoff is the API server's default retry backoff for
// TokenReview and SubjectAccessReview calls (genericoptions.
// DefaultAuthWebhookRetryBackoff, which the kubelet uses; that package is not
// imported for its many dependencies).
func webhookRetryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// newAuthenticator builds the kubelet's request authenticator: x509 client
// certificates verified against clientCA (when not nil), bearer tokens by
// TokenReview through client (when not nil), cached for ttl, then anonymous
// (when enabled).
func newAuthenticator(clientCA dynamiccertificates.CAContentProvider, client kubernetes.Interface, ttl time.Duration, anonymous bool) (authenticator.Request, error) {
	c := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: anonymous},
		CacheTTL:                           ttl,
		ClientCertificateCAContentProvider: clientCA,
	}
	if !isNil(client) {
		c.TokenAccessReviewClient = client.AuthenticationV1()
		c.WebhookRetryBackoff = webhookRetryBackoff()
	}
	a, _, err := c.New()
	if err != nil {
		return nil, fmt.Errorf("authentication: %w (set ClientCAFile, Client or Anonymous)", err)
	}
	return a, nil
}

// newAuthorizer builds the authorizer of mode: SubjectAccessReview through
// client, cached for ttls, or AlwaysAllow.
func newAuthorizer(mode string, client kubernetes.Interface, ttls CacheTTLs) (authorizer.Authorizer, error) {
	switch mode {
	case AuthorizationAlwaysAllow:
		return authorizerfactory.NewAlwaysAllowAuthorizer(), nil
	case "", AuthorizationWebhook:
		if isNil(client) {
			return nil, errors.New("authorization: no client provided, cannot use webhook authorization")
		}
		c := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: client.AuthorizationV1(),
			AllowCacheTTL:             ttls.Authorized,
			DenyCacheTTL:              ttls.Unauthorized,
			WebhookRetryBackoff:       webhookRetryBackoff(),
		}
		a, err := c.New()
		if err != nil {
			return nil, fmt.Errorf("authorization: %w", err)
		}
		return a, nil
	default:
		return nil, fmt.Errorf("authorization: unknown mode %q (want %q or %q)", mode, AuthorizationWebhook, AuthorizationAlwaysAllow)
	}
}

// isNil reports whether client is nil, also as a typed nil pointer.
func isNil(client kubernetes.Interface) bool {
	if client == nil {
		return true
	}
	v := reflect.ValueOf(client)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Request paths whose subresource is not the default "proxy", as the
// kubelet's (pkg/kubelet/server).
const (
	statsPath       = "/stats/"
	metricsPath     = "/metrics"
	logsPath        = "/logs/"
	checkpointPath  = "/checkpoint/"
	statuszPath     = "/statusz"
	flagzPath       = "/flagz"
	podsPath        = "/pods"
	runningPodsPath = "/runningpods/"
	healthzPath     = "/healthz"
	configzPath     = "/configz"
)

// isSubpath reports whether subpath is path or below it.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && subpath[len(path)] == '/')
}

// apiVerb is the authorization verb of an HTTP method, as the kubelet
// maps it; other methods have the empty verb.
func apiVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// subresources are the node subresources a request path is authorized
// against, in order; the request is allowed when any one is. This is the
// kubelet's mapping with KubeletFineGrainedAuthz (GA and locked on since
// 1.36):
//
//	/pods, /runningpods/*  pods, then proxy
//	/healthz/*             healthz, then proxy
//	/configz               configz, then proxy
//	/stats/*               stats
//	/metrics/*             metrics
//	/logs/*                log
//	/checkpoint/*          checkpoint
//	/statusz               statusz
//	/flagz                 configz
//	anything else          proxy (so /containerLogs, /exec, /attach, /portForward, /run)
func subresources(path string) []string {
	var subs []string
	switch {
	case isSubpath(path, podsPath):
		subs = append(subs, "pods")
	case isSubpath(path, healthzPath):
		subs = append(subs, "healthz")
	case isSubpath(path, configzPath):
		subs = append(subs, "configz")
	case isSubpath(path, runningPodsPath):
		subs = append(subs, "pods")
	}
	switch {
	case isSubpath(path, statsPath):
		subs = append(subs, "stats")
	case isSubpath(path, metricsPath):
		subs = append(subs, "metrics")
	case isSubpath(path, logsPath):
		subs = append(subs, "log")
	case isSubpath(path, checkpointPath):
		subs = append(subs, "checkpoint")
	case isSubpath(path, statuszPath):
		subs = append(subs, "statusz")
	case isSubpath(path, flagzPath):
		subs = append(subs, "configz")
	default:
		subs = append(subs, "proxy")
	}
	return subs
}

// requestAttributes are the authorization attributes of a request by u to
// the node nodeName: verb from the HTTP method, resource nodes, name the
// node, one record per subresource.
func requestAttributes(u user.Info, r *http.Request, nodeName string) []authorizer.Attributes {
	verb := apiVerb(r.Method)
	var attrs []authorizer.Attributes
	for _, sub := range subresources(r.URL.Path) {
		attrs = append(attrs, authorizer.AttributesRecord{
			User:            u,
			Verb:            verb,
			APIVersion:      "v1",
			Resource:        "nodes",
			Subresource:     sub,
			Name:            nodeName,
			ResourceRequest: true,
			Path:            r.URL.Path,
		})
	}
	return attrs
}

// authorize decides whether u may make request r. It returns the HTTP
// status and message of a refusal, or 0 when allowed.
func (s *Server) authorize(u user.Info, r *http.Request) (int, string) {
	attrs := requestAttributes(u, r, s.cfg.NodeName)
	var subs []string
	for _, a := range attrs {
		subs = append(subs, a.GetSubresource())
		decision, _, err := s.authz.Authorize(r.Context(), a)
		if err != nil {
			s.log.Error("authorization error", "user", u.GetName(), "verb", a.GetVerb(), "subresource", a.GetSubresource(), "error", err)
			return http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
				u.GetName(), a.GetVerb(), a.GetResource(), a.GetSubresource())
		}
		if decision == authorizer.DecisionAllow {
			return 0, ""
		}
	}
	s.log.Debug("forbidden", "user", u.GetName(), "verb", attrs[0].GetVerb(), "subresources", subs)
	return http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)\n",
		u.GetName(), attrs[0].GetVerb(), attrs[0].GetResource(), subs)
}
