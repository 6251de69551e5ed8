package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// ServerConfig configures the kubelet API's serving certificate.
type ServerConfig struct {
	// CertDir holds the certificate and key
	// (<CertDir>/kubelet-server-current.pem).
	CertDir string
	// NodeName is this node's name: the certificate is for
	// system:node:<NodeName> in group system:nodes.
	NodeName string
	// DNSNames and IPs are the names the certificate is valid for: the
	// node's host name and addresses.
	DNSNames []string
	IPs      []net.IP
	// Client requests the certificates, with the node's credentials.
	Client kubernetes.Interface
	// Logger receives what the certificate manager does; nil discards.
	Logger hclog.Logger
}

// Server is the kubelet API's serving certificate, requested through a
// kubernetes.io/kubelet-serving CSR and renewed at 70 to 90 % of its
// lifetime. The signer's approval is the cluster's: kube-controller-manager
// does not approve serving CSRs, an operator or an approver does.
type Server struct {
	cfg     ServerConfig
	manager certificate.Manager
	log     hclog.Logger
}

// NewServer builds the serving certificate manager; Run starts it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.CertDir == "" || cfg.NodeName == "" || cfg.Client == nil {
		return nil, errors.New("certificate: CertDir, NodeName and Client are required")
	}
	if len(cfg.DNSNames) == 0 && len(cfg.IPs) == 0 {
		return nil, fmt.Errorf("serving certificate for node %s: no host name or address to request it for", cfg.NodeName)
	}
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("cert dir: %w", err)
	}
	store, err := certificate.NewFileStoreWithLogger(newLogger(cfg.Logger), serverStoreName, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("cert dir %s: %w", cfg.CertDir, err)
	}
	lctx := klog.NewContext(context.Background(), newLogger(cfg.Logger))
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return cfg.Client, nil },
		Template: &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "system:node:" + cfg.NodeName, Organization: []string{"system:nodes"}},
			DNSNames:    cfg.DNSNames,
			IPAddresses: cfg.IPs,
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "serving certificate",
		Ctx:              &lctx,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate in %s: %w", cfg.CertDir, err)
	}
	return &Server{cfg: cfg, manager: m, log: cfg.Logger}, nil
}

// GetCertificate is the tls.Config callback: the current serving
// certificate, or an error until one is issued.
func (s *Server) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.manager.Current(); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("no serving certificate for node %s yet: its kubernetes.io/kubelet-serving CSR awaits approval", s.cfg.NodeName)
}

// Current is the current serving certificate; nil before one is issued.
func (s *Server) Current() *tls.Certificate { return s.manager.Current() }

// Run runs the manager until ctx ends, logging each certificate it gets.
func (s *Server) Run(ctx context.Context) error {
	s.manager.Start()
	defer s.manager.Stop()
	last := s.manager.Current()
	if last == nil {
		s.log.Info("requesting a serving certificate: approve its kubernetes.io/kubelet-serving CSR (kubectl certificate approve)", "node", s.cfg.NodeName)
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		if cur := s.manager.Current(); cur != nil && cur != last {
			s.log.Info("serving certificate", "serial", cur.Leaf.SerialNumber.String(), "not_after", cur.Leaf.NotAfter.UTC())
			last = cur
		}
	}, time.Second)
	return nil
}
