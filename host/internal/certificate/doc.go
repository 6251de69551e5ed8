// Package certificate is the node's TLS credentials from the cluster, as
// the kubelet's pkg/kubelet/certificate: the client certificate obtained
// with a bootstrap token (TLS bootstrap) and renewed before it expires, and
// the kubelet API's serving certificate requested through a
// kubernetes.io/kubelet-serving CSR. Both are client-go's certificate
// manager (k8s.io/client-go/util/certificate) over a file store in the
// kubelet's layout (<cert-dir>/kubelet-client-current.pem and
// kubelet-server-current.pem, symlinks to dated files holding certificate
// and key); this package chooses the credentials to start from, writes the
// kubeconfig, and switches the API connections to a renewed certificate.
package certificate
