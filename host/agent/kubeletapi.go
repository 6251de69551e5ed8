package agent

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmlet/wasmlet/host/internal/kubeletapi"
)

// servesKubeletAPI reports whether the kubelet API is served: a port is
// set and clients can be authenticated (TokenReview through the cluster,
// or x509 against a client CA, or anonymous by choice).
func (a *Agent) servesKubeletAPI() bool {
	return a.cfg.Port > 0 && (a.cluster != nil || a.cfg.ClientCAFile != "" || a.cfg.AnonymousAuth)
}

// newKubeletAPI builds the kubelet API server for node.
func (a *Agent) newKubeletAPI(node *v1.Node) (*kubeletapi.Server, error) {
	mode := a.cfg.AuthorizationMode
	if mode == "" {
		mode = kubeletapi.AuthorizationWebhook
		if a.cluster == nil {
			mode = kubeletapi.AuthorizationAlwaysAllow
		}
	}
	var ips []string
	for _, ad := range node.Status.Addresses {
		if ad.Type == v1.NodeInternalIP {
			ips = append(ips, ad.Address)
		}
	}
	s, err := kubeletapi.New(kubeletapi.Config{
		Address: a.cfg.SecureAddress, Port: a.cfg.Port,
		TLSCertFile: a.cfg.TLSCertFile, TLSKeyFile: a.cfg.TLSPrivateKeyFile, CertDir: filepath.Join(a.cfg.RootDir, "pki"),
		NodeName: a.cfg.NodeName, NodeIPs: ips,
		ClientCAFile: a.cfg.ClientCAFile, Client: a.cluster.Client(), Anonymous: a.cfg.AnonymousAuth, Authorization: mode,
		Logs: kubeletapi.PodLogs(a.pods.PodByName, func(ctx context.Context, p *v1.Pod, c string, previous bool) (string, func() bool, error) {
			return a.rt.LogFile(ctx, p, c, previous)
		}),
		Logger: a.log.Named("kubeletapi"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: kubelet API: %w", err)
	}
	kubeletapi.RegisterStreaming(s, a.rt, a.pods.PodByName)
	return s, nil
}
