package kubeletapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Names of the generated self-signed certificate and key in CertDir, the
// kubelet's.
const (
	selfSignedCertName = "kubelet.crt"
	selfSignedKeyName  = "kubelet.key"
)

// renewBefore is how long before its expiry a generated certificate is
// replaced at start.
const renewBefore = 30 * 24 * time.Hour

// servingCertFiles returns the serving certificate and key files: the
// configured ones, or a self-signed pair in CertDir, generated when missing,
// unreadable, expiring or not valid for the node's names.
func servingCertFiles(cfg Config) (certFile, keyFile string, err error) {
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
			return "", "", errors.New("TLSCertFile and TLSKeyFile must be set together")
		}
		return cfg.TLSCertFile, cfg.TLSKeyFile, nil
	}
	if cfg.CertDir == "" {
		return "", "", errors.New("CertDir is required for a self-signed serving certificate when TLSCertFile and TLSKeyFile are not set")
	}
	ips, err := parseIPs(cfg.NodeIPs)
	if err != nil {
		return "", "", err
	}
	certFile = filepath.Join(cfg.CertDir, selfSignedCertName)
	keyFile = filepath.Join(cfg.CertDir, selfSignedKeyName)
	if selfSignedValid(certFile, keyFile, cfg.NodeName, ips, time.Now()) {
		return certFile, keyFile, nil
	}
	if err := writeSelfSigned(certFile, keyFile, cfg.NodeName, ips); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func parseIPs(addrs []string) ([]net.IP, error) {
	var ips []net.IP
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil {
			return nil, fmt.Errorf("node IP %q is not an IP address", a)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// selfSignedValid reports whether certFile and keyFile hold a matching pair
// whose leaf is valid at now for renewBefore more and names host and every
// one of ips.
func selfSignedValid(certFile, keyFile, host string, ips []net.IP, now time.Time) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	if now.Before(leaf.NotBefore) || now.Add(renewBefore).After(leaf.NotAfter) {
		return false
	}
	if host != "" && leaf.VerifyHostname(host) != nil {
		return false
	}
	for _, ip := range ips {
		if leaf.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

// writeSelfSigned generates a certificate for host and ips, signed by a
// throwaway CA (client-go's GenerateSelfSignedCertKey, as the kubelet), and
// writes it (with the CA) and its key.
func writeSelfSigned(certFile, keyFile, host string, ips []net.IP) error {
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return fmt.Errorf("self-signed certificate: %w", err)
		}
	}
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, ips, nil)
	if err != nil {
		return fmt.Errorf("generate self-signed certificate: %w", err)
	}
	if err := keyutil.WriteKey(keyFile, key); err != nil {
		return fmt.Errorf("write self-signed key: %w", err)
	}
	if err := certutil.WriteCert(certFile, cert); err != nil {
		return fmt.Errorf("write self-signed certificate: %w", err)
	}
	return nil
}

// dynamicTLS is the serving TLS configuration kept up to date with the
// serving certificate and client CA files.
type dynamicTLS struct {
	config     *tls.Config
	controller *dynamiccertificates.DynamicServingCertificateController
	serving    *dynamiccertificates.DynamicCertKeyPairContent // nil with getCert
	clientCA   dynamiccertificates.CAContentProvider          // nil without x509
}

// newDynamicTLS loads the serving pair (or, with getCert, takes each
// handshake's certificate from it) and the client CA (nil: none) once;
// run keeps them current.
func newDynamicTLS(certFile, keyFile string, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), clientCA dynamiccertificates.CAContentProvider) (*dynamicTLS, error) {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: getCert,
	}
	var serving *dynamiccertificates.DynamicCertKeyPairContent
	var servingProvider dynamiccertificates.CertKeyContentProvider
	if getCert == nil {
		var err error
		if serving, err = dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", certFile, keyFile); err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		servingProvider = serving
	}
	var ca dynamiccertificates.CAContentProvider
	if clientCA != nil {
		// Ask for a certificate without requiring one: the authenticator
		// verifies it, and token or anonymous requests come without.
		base.ClientAuth = tls.RequestClientCert
		ca = clientCA
	}
	c := dynamiccertificates.NewDynamicServingCertificateController(base, ca, servingProvider, nil, nil)
	if serving != nil {
		serving.AddListener(c)
	}
	if n, ok := clientCA.(dynamiccertificates.Notifier); ok {
		n.AddListener(c) // a file, reloaded
	}
	if err := c.RunOnce(); err != nil {
		return nil, fmt.Errorf("serving TLS configuration: %w", err)
	}
	return &dynamicTLS{
		config: &tls.Config{
			MinVersion:         tls.VersionTLS12,
			NextProtos:         base.NextProtos,
			GetConfigForClient: c.GetConfigForClient,
		},
		controller: c,
		serving:    serving,
		clientCA:   clientCA,
	}, nil
}

// run watches the files until ctx ends.
func (d *dynamicTLS) run(ctx context.Context) {
	if d.serving != nil {
		go d.serving.Run(ctx, 1)
	}
	if r, ok := d.clientCA.(interface{ Run(context.Context, int) }); ok {
		go r.Run(ctx, 1)
	}
	d.controller.Run(1, ctx.Done())
}
