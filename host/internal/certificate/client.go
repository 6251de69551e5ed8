package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
)

// The file store names, as the kubelet's: <CertDir>/kubelet-client-current.pem
// and kubelet-server-current.pem.
const (
	clientStoreName = "kubelet-client"
	serverStoreName = "kubelet-server"
)

// DefaultRetryInterval is how often a bad bootstrap kubeconfig is read
// again.
const DefaultRetryInterval = 10 * time.Second

// ClientConfig configures the node's client credentials.
type ClientConfig struct {
	// KubeConfig is the node's kubeconfig (--kubeconfig). When it holds a
	// client certificate valid now, that certificate is used (and, with
	// Rotate, renewed); otherwise it is written from BootstrapKubeConfig,
	// pointing at <CertDir>/kubelet-client-current.pem.
	KubeConfig string
	// BootstrapKubeConfig is a kubeconfig with a bootstrap token
	// (--bootstrap-kubeconfig), used to request the first certificate.
	BootstrapKubeConfig string
	// CertDir holds the certificates and keys (--cert-dir).
	CertDir string
	// NodeName is this node's name: the certificate is for
	// system:node:<NodeName> in group system:nodes.
	NodeName string
	// Rotate renews the certificate before it expires
	// (--rotate-certificates); without it a certificate is requested only
	// when there is none.
	Rotate bool
	// RetryInterval is how often a bad bootstrap kubeconfig is read again
	// (DefaultRetryInterval when zero).
	RetryInterval time.Duration
	// NewClientset builds the clientset that requests certificates from a
	// REST config; nil is kubernetes.NewForConfig.
	NewClientset func(*rest.Config) (kubernetes.Interface, error)
	// Logger receives what the certificate manager does; nil discards.
	Logger hclog.Logger
}

// Client is the node's client credentials: a certificate manager whose
// current certificate every API connection presents, and a transport that
// closes its connections when the certificate changes so that the next
// requests handshake with the new one.
type Client struct {
	cfg     ClientConfig
	manager certificate.Manager
	rest    *rest.Config // the cluster and the rotating transport, no credentials
	dialer  *connrotation.Dialer
	log     hclog.Logger
}

// NewClient chooses the credentials to start from. A KubeConfig with a
// client certificate valid now is used as it is (the bootstrap kubeconfig
// is not read): the certificate it names seeds the manager. Otherwise the
// bootstrap kubeconfig is read; while it is missing, unreadable or has no
// server or token, NewClient logs why (naming the file) and reads it
// again every RetryInterval until ctx ends. Once read, KubeConfig is
// written pointing at <CertDir>/kubelet-client-current.pem, which Run's
// certificate manager fills through a CSR.
func NewClient(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.NewClientset == nil {
		cfg.NewClientset = func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }
	}
	if cfg.KubeConfig == "" || cfg.CertDir == "" || cfg.NodeName == "" {
		return nil, errors.New("certificate: KubeConfig, CertDir and NodeName are required")
	}
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("cert dir: %w", err)
	}
	store, err := certificate.NewFileStoreWithLogger(newLogger(cfg.Logger), clientStoreName, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("cert dir %s: %w", cfg.CertDir, err)
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	var certConfig, userConfig *rest.Config
	mcfg := &certificate.Config{
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:node:" + cfg.NodeName, Organization: []string{"system:nodes"},
		}},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:  certificate.DefaultKubeletClientGetUsages,
		Name:       "client certificate",
	}
	if rc, pair, why := validClientConfig(cfg.KubeConfig, time.Now()); rc != nil {
		userConfig, certConfig = rc, rc
		c.log.Info("kubeconfig holds a valid client certificate: no bootstrap", "kubeconfig", cfg.KubeConfig)
		// A kubeconfig written by bootstrapping names the store's file;
		// another one (kubeadm's, made by hand) seeds the store.
		if userConfig.CertFile != store.CurrentPath() {
			mcfg.BootstrapCertificatePEM, mcfg.BootstrapKeyPEM = pair.cert, pair.key
		}
	} else {
		if cfg.BootstrapKubeConfig == "" {
			return nil, fmt.Errorf("kubeconfig %s: %s, and no bootstrap kubeconfig to request one with", cfg.KubeConfig, why)
		}
		c.log.Info("bootstrapping the client certificate", "kubeconfig", cfg.KubeConfig, "reason", why, "bootstrap_kubeconfig", cfg.BootstrapKubeConfig)
		if certConfig, err = c.waitForBootstrap(ctx); err != nil {
			return nil, err
		}
		userConfig = rest.AnonymousClientConfig(certConfig)
		userConfig.CertFile, userConfig.KeyFile = store.CurrentPath(), store.CurrentPath()
		if err := writeKubeconfig(certConfig, cfg.KubeConfig, store.CurrentPath()); err != nil {
			return nil, fmt.Errorf("write kubeconfig %s: %w", cfg.KubeConfig, err)
		}
	}
	mcfg.CertificateStore = store
	mcfg.ClientsetFn = func(current *tls.Certificate) (kubernetes.Interface, error) {
		// With a certificate, renew with it (the selfnodeclient
		// approval); without, with the bootstrap token.
		if current != nil {
			return cfg.NewClientset(userConfig)
		}
		return cfg.NewClientset(certConfig)
	}
	lctx := klog.NewContext(context.Background(), newLogger(c.log))
	mcfg.Ctx = &lctx
	if c.manager, err = certificate.NewManager(mcfg); err != nil {
		return nil, fmt.Errorf("client certificate in %s: %w", cfg.CertDir, err)
	}
	if c.rest, c.dialer, err = rotatingConfig(userConfig, c.manager); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cfg.KubeConfig, err)
	}
	return c, nil
}

// waitForBootstrap reads the bootstrap kubeconfig until it is usable or
// ctx ends.
func (c *Client) waitForBootstrap(ctx context.Context) (*rest.Config, error) {
	for attempt := 0; ; attempt++ {
		rc, err := LoadBootstrapKubeConfig(c.cfg.BootstrapKubeConfig)
		if err == nil {
			return rc, nil
		}
		c.log.Error("cannot bootstrap the client certificate; reading the bootstrap kubeconfig again", "error", err, "retry_in", c.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped while waiting for a usable bootstrap kubeconfig (%v): %w", err, ctx.Err())
		case <-time.After(c.cfg.RetryInterval):
		}
	}
}

// LoadBootstrapKubeConfig reads a bootstrap kubeconfig: its current
// context must name a server and a token (token or tokenFile), as a
// bootstrap token is. The error names the file.
func LoadBootstrapKubeConfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: %w", path, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: %w", path, err)
	}
	if rc.Host == "" {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: no server", path)
	}
	if rc.BearerToken == "" && rc.BearerTokenFile == "" {
		return nil, fmt.Errorf("bootstrap kubeconfig %s: no token (the current context's user needs a bootstrap token, <id>.<secret>)", path)
	}
	return rc, nil
}

// RESTConfig is the cluster's REST config whose connections present the
// manager's current certificate: pass it to clients instead of loading
// the kubeconfig. Its transport is shared: every client built from it is
// switched to a renewed certificate.
func (c *Client) RESTConfig() *rest.Config { return rest.CopyConfig(c.rest) }

// Current is the current client certificate; nil before the first one is
// issued or once it has expired.
func (c *Client) Current() *tls.Certificate { return c.manager.Current() }

// WaitForCertificate blocks until there is a current certificate or ctx
// ends, logging every minute that it waits.
func (c *Client) WaitForCertificate(ctx context.Context) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	since := time.Now()
	last := since
	for c.manager.Current() == nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for the client certificate: %w", ctx.Err())
		case now := <-t.C:
			if now.Sub(last) >= time.Minute {
				c.log.Info("still waiting for the client certificate (is the CSR approved?)", "waited", now.Sub(since).Round(time.Second))
				last = now
			}
		}
	}
	return nil
}

// Run runs the certificate manager until ctx ends: it requests a
// certificate when there is none and, with Rotate, renews it at 70 to 90 %
// of its lifetime (client-go's jittered deadline). When the current
// certificate changes it closes every API connection, so the next requests
// handshake with the new one. Without Rotate the manager stops once it has
// a certificate.
func (c *Client) Run(ctx context.Context) error {
	last := c.manager.Current()
	if c.cfg.Rotate || last == nil {
		c.manager.Start()
		defer c.manager.Stop()
	}
	if last != nil {
		c.log.Info("client certificate", "serial", last.Leaf.SerialNumber.String(), "not_after", last.Leaf.NotAfter.UTC())
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		cur := c.manager.Current()
		if cur == nil || cur == last {
			return
		}
		if last == nil {
			c.log.Info("client certificate issued", "serial", cur.Leaf.SerialNumber.String(), "not_after", cur.Leaf.NotAfter.UTC(), "file", filepath.Join(c.cfg.CertDir, clientStoreName+"-current.pem"))
			if !c.cfg.Rotate {
				c.manager.Stop()
			}
		} else {
			c.log.Info("client certificate rotated: closing API connections", "serial", cur.Leaf.SerialNumber.String(),
				"not_after", cur.Leaf.NotAfter.UTC(), "previous_serial", last.Leaf.SerialNumber.String())
		}
		last = cur
		c.dialer.CloseAll()
	}, time.Second)
	return nil
}

// rotatingConfig is base's cluster (server, CA, server name) with a
// transport whose TLS handshakes present m's current certificate and
// whose connections a connrotation.Dialer can close, as the kubelet's
// UpdateTransport. The returned config carries no credentials of its own.
func rotatingConfig(base *rest.Config, m certificate.Manager) (*rest.Config, *connrotation.Dialer, error) {
	rc := rest.AnonymousClientConfig(base)
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, nil, err
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert := m.Current(); cert != nil {
			return cert, nil
		}
		return &tls.Certificate{}, nil // no certificate yet: anonymous
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	rc.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport carries the TLS settings; rest refuses both.
	rc.TLSClientConfig = rest.TLSClientConfig{}
	return rc, d, nil
}

type pemPair struct{ cert, key []byte }

// tlsPEM is the client certificate and key of rc, from its files or data.
func tlsPEM(rc *rest.Config) (pemPair, error) {
	p := pemPair{cert: rc.CertData, key: rc.KeyData}
	var err error
	if rc.CertFile != "" {
		if p.cert, err = os.ReadFile(rc.CertFile); err != nil {
			return p, err
		}
	}
	if rc.KeyFile != "" {
		if p.key, err = os.ReadFile(rc.KeyFile); err != nil {
			return p, err
		}
	}
	if len(p.cert) == 0 || len(p.key) == 0 {
		return p, errors.New("no client certificate and key")
	}
	return p, nil
}

// validClientConfig loads the kubeconfig at path and returns it with its
// client certificate and key when it exists and they are valid at now;
// otherwise nil and why.
func validClientConfig(path string, now time.Time) (*rest.Config, pemPair, string) {
	if _, err := os.Stat(path); err != nil {
		if os.IsNotExist(err) {
			return nil, pemPair{}, "no such file"
		}
		return nil, pemPair{}, err.Error()
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, pemPair{}, err.Error()
	}
	p, err := tlsPEM(rc)
	if err != nil {
		return nil, pemPair{}, err.Error()
	}
	if _, err := tls.X509KeyPair(p.cert, p.key); err != nil {
		return nil, pemPair{}, err.Error()
	}
	certs, err := certutil.ParseCertsPEM(p.cert)
	if err != nil {
		return nil, pemPair{}, err.Error()
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return nil, pemPair{}, fmt.Sprintf("client certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return rc, p, ""
}

// writeKubeconfig writes the node's kubeconfig: bootstrap's cluster,
// authenticated by the certificate and key in pemPath.
func writeKubeconfig(bootstrap *rest.Config, path, pemPath string) error {
	cluster := &clientcmdapi.Cluster{
		Server: bootstrap.Host, InsecureSkipTLSVerify: bootstrap.Insecure,
		CertificateAuthority: bootstrap.CAFile, TLSServerName: bootstrap.ServerName,
	}
	if bootstrap.CAFile == "" {
		cluster.CertificateAuthorityData = bootstrap.CAData
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(kc, path)
}
