package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/wasmlet/wasmlet/host/internal/certificate"
	"github.com/wasmlet/wasmlet/host/internal/cluster"
	"github.com/wasmlet/wasmlet/host/internal/container"
	"github.com/wasmlet/wasmlet/host/internal/kubeletapi"
)

// servesKubeletAPI reports whether the kubelet API is served: a port is
// set and clients can be authenticated (TokenReview through the cluster,
// or x509 against a client CA, or anonymous by choice).
func (a *Agent) servesKubeletAPI() bool {
	authn := a.cfg.Authentication
	return *a.cfg.Port > 0 && (a.cluster != nil || authn.X509.ClientCAFile != "" || *authn.Anonymous.Enabled)
}

// newKubeletAPI builds the kubelet API server for node; with
// ServerTLSBootstrap it spawns the serving certificate's manager.
func (a *Agent) newKubeletAPI(node *v1.Node, spawn func(string, func(context.Context) error)) (*kubeletapi.Server, error) {
	var ips []string
	var netIPs []net.IP
	var names []string
	for _, ad := range node.Status.Addresses {
		switch ad.Type {
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip := net.ParseIP(ad.Address); ip != nil {
				netIPs = append(netIPs, ip)
			}
			if ad.Type == v1.NodeInternalIP {
				ips = append(ips, ad.Address)
			}
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			names = append(names, ad.Address)
		}
	}
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if a.cfg.ServerTLSBootstrap {
		srv, err := certificate.NewServer(certificate.ServerConfig{
			CertDir: a.cfg.CertDir, NodeName: a.cfg.NodeName, DNSNames: names, IPs: netIPs,
			Client: a.cluster.Client(), Logger: a.log.Named("certificate"),
		})
		if err != nil {
			return nil, fmt.Errorf("agent: kubelet API: %w", err)
		}
		spawn("serving certificate", srv.Run)
		getCert = srv.GetCertificate
	}
	authn, authz := a.cfg.Authentication, a.cfg.Authorization
	caFile, ca, caSource := authn.X509.ClientCAFile, []byte(nil), ""
	if caFile == "" && a.cluster != nil {
		// As kubeadm configures the kubelet: the API server's client
		// certificate is issued by the cluster CA.
		var err error
		if caFile, ca, err = cluster.ClusterCA(a.cfg.KubeConfig); err != nil {
			return nil, fmt.Errorf("agent: kubelet API: client CA: %w", err)
		}
		caSource = "the cluster CA of kubeconfig " + a.cfg.KubeConfig
	}
	s, err := kubeletapi.New(kubeletapi.Config{
		Address: a.cfg.SecureAddress, Port: *a.cfg.Port, GetCertificate: getCert,
		TLSCertFile: a.cfg.TLSCertFile, TLSKeyFile: a.cfg.TLSPrivateKeyFile, CertDir: a.cfg.CertDir,
		NodeName: a.cfg.NodeName, NodeIPs: ips,
		ClientCAFile: caFile, ClientCA: ca, ClientCASource: caSource, Client: a.cluster.Client(), Anonymous: *authn.Anonymous.Enabled,
		Authorization: string(authz.Mode), NoTokenReview: !*authn.Webhook.Enabled,
		Caches: kubeletapi.CacheTTLs{
			Token:        authn.Webhook.CacheTTL.Duration,
			Authorized:   authz.Webhook.CacheAuthorizedTTL.Duration,
			Unauthorized: authz.Webhook.CacheUnauthorizedTTL.Duration,
		},
		Logs: kubeletapi.PodLogs(a.pods.PodByName, func(ctx context.Context, p *v1.Pod, c string, previous bool) (string, func() bool, error) {
			return a.rt.LogFile(ctx, p, c, previous)
		}),
		Logger: a.log.Named("kubeletapi"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: kubelet API: %w", err)
	}
	kubeletapi.RegisterStreaming(s, a.rt, a.pods.PodByName)
	st := a.stats
	kubeletapi.RegisterNodeEndpoints(s, kubeletapi.NodeEndpoints{
		Pods: a.statuses.Pods, RunningPods: a.runningPods, Config: a.configz,
		Gatherer: a.gatherer, Summary: st.SummaryHandler(), ResourceMetrics: st.ResourceMetricsHandler(),
		CadvisorMetrics: st.CadvisorMetricsHandler(),
	})
	return s, nil
}

// runningPods are the pods the runtime has, each with its running
// containers (name only), as the kubelet's /runningpods.
func (a *Agent) runningPods(ctx context.Context) ([]v1.Pod, error) {
	pods, err := a.rt.GetPods(ctx)
	if err != nil {
		return nil, err
	}
	var out []v1.Pod
	for _, p := range pods {
		vp := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID}}
		for _, o := range p.Objects {
			if !o.Sandbox && o.State == container.StateRunning {
				vp.Spec.Containers = append(vp.Spec.Containers, v1.Container{Name: o.Name})
			}
		}
		if len(vp.Spec.Containers) > 0 {
			out = append(out, vp)
		}
	}
	return out, nil
}

// configz is the agent's configuration as the kubelet's type, for
// /configz: the settings both have (v1alpha1's KubeletConfiguration), and
// what the agent made of them — the server is enabled, and TokenReview is
// in use only on a node of a cluster.
func (a *Agent) configz() *kubeletconfig.KubeletConfiguration {
	k := a.cfg.KubeletConfiguration()
	k.EnableServer = ptr.To(a.servesKubeletAPI())
	k.Authentication.Webhook.Enabled = ptr.To(a.cluster != nil && *a.cfg.Authentication.Webhook.Enabled)
	return k
}
