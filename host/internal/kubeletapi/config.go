package kubeletapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/kubernetes"
)

// Authorization modes of Config.Authorization, as the kubelet's
// authorization.mode.
const (
	// AuthorizationWebhook asks the API server with a SubjectAccessReview
	// (the default).
	AuthorizationWebhook = "Webhook"
	// AuthorizationAlwaysAllow allows every authenticated request.
	AuthorizationAlwaysAllow = "AlwaysAllow"
)

// DefaultPort is the kubelet's port, the one the API server dials for a
// node's daemon endpoint.
const DefaultPort = 10250

// Config configures a Server. The zero value of each field is its default
// except where noted.
type Config struct {
	// Address is the listen address; empty means 0.0.0.0.
	Address string
	// Port is the listen port; 0 means DefaultPort (10250).
	Port int

	// TLSCertFile and TLSKeyFile are the serving certificate and key (PEM),
	// reloaded when the files change. When both are empty the server
	// generates a self-signed certificate for NodeName and NodeIPs, writes
	// it to CertDir/kubelet.crt and CertDir/kubelet.key, and reuses it on
	// the next start while it is valid for those names and not about to
	// expire.
	TLSCertFile, TLSKeyFile string
	// CertDir holds the generated self-signed certificate; required when
	// TLSCertFile and TLSKeyFile are empty.
	CertDir string
	// GetCertificate, when set, gives the serving certificate at each
	// handshake (a rotating one: host/internal/certificate) instead of
	// TLSCertFile/TLSKeyFile or a self-signed one.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)

	// NodeName is this node's name: the name authorized against (nodes/<name>)
	// and the self-signed certificate's DNS name.
	NodeName string
	// NodeIPs are the node's addresses, added to the self-signed
	// certificate.
	NodeIPs []string

	// ClientCAFile is a PEM bundle of CAs whose client certificates
	// authenticate (user = CommonName, groups = Organization); it is
	// reloaded when the file changes. Empty disables x509 authentication
	// unless ClientCA is set.
	ClientCAFile string
	// ClientCA, without ClientCAFile, is a PEM bundle of client CAs held
	// in memory: the cluster CA of the node's kubeconfig, as kubeadm
	// configures the kubelet. ClientCASource names where it came from in
	// the start-up log.
	ClientCA       []byte
	ClientCASource string
	// Client is used for TokenReview (bearer token authentication, cached
	// 2 min) and SubjectAccessReview (Webhook authorization). Nil disables
	// token authentication, and then Authorization must be "AlwaysAllow".
	Client kubernetes.Interface
	// Anonymous lets requests without credentials through as
	// system:anonymous (still subject to authorization). Off by default, as
	// in the kubelet's recommended configuration.
	Anonymous bool
	// Authorization is "Webhook" (the default) or "AlwaysAllow".
	Authorization string
	// NoTokenReview turns bearer-token authentication off even with a
	// Client (KubeletConfiguration authentication.webhook.enabled: false).
	NoTokenReview bool
	// Caches are the lifetimes of the webhook decisions.
	Caches CacheTTLs

	// Logs finds container log files for /containerLogs; nil leaves the
	// endpoint out.
	Logs Logs
	// Logger receives start and stop at info, each request at debug; nil
	// discards.
	Logger hclog.Logger
}

// CacheTTLs are how long the webhook answers are cached (the
// KubeletConfiguration's authentication.webhook.cacheTTL and
// authorization.webhook.cacheAuthorizedTTL / cacheUnauthorizedTTL); a zero
// field means the kubelet's default: 2 min, 5 min, 30 s.
type CacheTTLs struct {
	// Token is the lifetime of a TokenReview answer.
	Token time.Duration
	// Authorized and Unauthorized are the lifetimes of a
	// SubjectAccessReview's allow and deny.
	Authorized, Unauthorized time.Duration
}

// withDefaults fills the zero lifetimes with the kubelet's defaults.
func (c CacheTTLs) withDefaults() CacheTTLs {
	if c.Token == 0 {
		c.Token = tokenCacheTTL
	}
	if c.Authorized == 0 {
		c.Authorized = authorizedCacheTTL
	}
	if c.Unauthorized == 0 {
		c.Unauthorized = deniedCacheTTL
	}
	return c
}

// Logs finds a container's CRI log file.
type Logs interface {
	// LogFile is the CRI log file of the container of the pod
	// namespace/name: the current (or last) instance, or with previous the
	// one before it; running reports whether that instance still runs
	// (follow stops when it stops). It returns an error wrapping
	// ErrNotFound when the pod or container is unknown (see PodNotFound,
	// ContainerNotFound), answered 404; any other error is answered 400
	// with its text, as the kubelet does for "previous terminated container
	// ... not found" or "container ... is waiting to start".
	LogFile(ctx context.Context, namespace, pod, container string, previous bool) (path string, running func() bool, err error)
}

// ErrNotFound marks an error of Logs.LogFile for an unknown pod or
// container; the server answers it with 404 and the error's text.
var ErrNotFound = errors.New("not found")

// notFoundError is an error with the kubelet's wording that wraps
// ErrNotFound.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func (e *notFoundError) Unwrap() error { return ErrNotFound }

// PodNotFound is the error for an unknown pod, worded as the kubelet's:
// `pod "name" does not exist`.
func PodNotFound(pod string) error {
	return &notFoundError{fmt.Sprintf("pod %q does not exist", pod)}
}

// ContainerNotFound is the error for a container the pod does not have,
// worded as the kubelet's: `container "c" not found in pod "p"`.
func ContainerNotFound(container, pod string) error {
	return &notFoundError{fmt.Sprintf("container %q not found in pod %q", container, pod)}
}
