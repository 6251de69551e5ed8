// Package imagecreds finds the credentials an image pull presents to a
// registry, as the kubelet does: the pod's imagePullSecrets
// (kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg) and those
// of its ServiceAccount, the exec credential provider plugins of a
// CredentialProviderConfig (API credentialprovider.kubelet.k8s.io/v1, the
// kubelet's --image-credential-provider-config and -bin-dir), and, for a
// node without an API server, a docker config.json. Each source is a
// keyring: the credentials whose keys match the image's repository, the
// longest key first (hosts may be globs such as *.example.com). The
// runtime tries them in that order; the first accepted wins.
package imagecreds

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/hashicorp/go-hclog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Secrets gives the Secrets of a namespace (objects.Source).
type Secrets interface {
	// Secret returns the named Secret.
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ServiceAccounts gives the ServiceAccounts of a namespace.
type ServiceAccounts interface {
	// ServiceAccount returns the named ServiceAccount.
	ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
}

// Config configures a Resolver.
type Config struct {
	// Secrets gives the pods' imagePullSecrets; nil reads none.
	Secrets Secrets
	// ServiceAccounts gives a pod's ServiceAccount, whose
	// imagePullSecrets are tried after the pod's own; nil reads none.
	ServiceAccounts ServiceAccounts
	// Providers are the exec credential provider plugins; nil runs none.
	Providers *Providers
	// DockerConfig is a docker config.json whose credentials every pull
	// may use, after the pod's and the providers' (for static pods of a
	// node without an API server); empty uses none.
	DockerConfig string
	// Logger receives what could not be read; nil discards.
	Logger hclog.Logger
}

// Resolver finds the credentials of a pod's image pulls.
type Resolver struct {
	cfg  Config
	node Keyring // from DockerConfig
}

// New returns a Resolver, or an error when the docker config file cannot
// be read.
func New(cfg Config) (*Resolver, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	r := &Resolver{cfg: cfg}
	if cfg.DockerConfig != "" {
		dc, err := ReadConfigFile(cfg.DockerConfig)
		if err != nil {
			return nil, fmt.Errorf("image pull docker config: %w", err)
		}
		r.node.Add(cfg.DockerConfig, dc)
	}
	return r, nil
}

// Repository is image's repository as the keyrings match it: registry
// host[:port] and path, no tag or digest; Docker Hub images as
// docker.io/library/NAME.
func Repository(image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	repo := ref.Context()
	if repo.RegistryStr() == name.DefaultRegistry {
		return "docker.io/" + repo.RepositoryStr(), nil
	}
	return repo.Name(), nil
}

// Credentials returns the credentials to try, in order, when pulling image
// for pod: those of the pod's imagePullSecrets, then its ServiceAccount's,
// then the credential providers', then the node's docker config; none
// means an anonymous pull. Secrets that cannot be read or decoded and
// providers that fail are left out; their errors are returned beside
// what was found, for the pull's message should it fail.
func (r *Resolver) Credentials(ctx context.Context, pod *v1.Pod, image string) ([]*runtimeapi.AuthConfig, error) {
	repo, err := Repository(image)
	if err != nil {
		return nil, err
	}
	var problems []error
	var secrets Keyring
	for _, s := range r.pullSecrets(ctx, pod) {
		if r.cfg.Secrets == nil {
			break
		}
		sec, err := r.cfg.Secrets.Secret(ctx, pod.Namespace, s)
		if err != nil {
			problems = append(problems, fmt.Errorf("image pull secret %s/%s: %w", pod.Namespace, s, err))
			continue
		}
		dc, err := FromSecret(sec)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		secrets.Add("secret "+pod.Namespace+"/"+s, dc)
	}
	creds := secrets.Lookup(repo)
	provided, err := r.cfg.Providers.Lookup(ctx, repo)
	if err != nil {
		problems = append(problems, err)
	}
	creds = append(creds, provided...)
	creds = append(creds, r.node.Lookup(repo)...)
	out := make([]*runtimeapi.AuthConfig, 0, len(creds))
	for _, c := range creds {
		out = append(out, &runtimeapi.AuthConfig{
			Username: c.Username, Password: c.Password,
			IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken,
		})
	}
	err = errors.Join(problems...)
	if err != nil {
		r.cfg.Logger.Warn("some image credentials could not be read; the pull goes on without them", "pod", pod.Namespace+"/"+pod.Name, "image", image, "error", err)
	}
	return out, err
}

// pullSecrets names the pod's imagePullSecrets, then those of its
// ServiceAccount not among them. A ServiceAccount that cannot be read
// (missing, or the node not allowed to get it) adds none: the
// ServiceAccount admission plugin has usually copied its pull secrets
// into the pod already.
func (r *Resolver) pullSecrets(ctx context.Context, pod *v1.Pod) []string {
	var names []string
	seen := map[string]bool{}
	add := func(refs []v1.LocalObjectReference) {
		for _, ref := range refs {
			if ref.Name != "" && !seen[ref.Name] {
				seen[ref.Name] = true
				names = append(names, ref.Name)
			}
		}
	}
	add(pod.Spec.ImagePullSecrets)
	if sa := pod.Spec.ServiceAccountName; sa != "" && r.cfg.ServiceAccounts != nil {
		acct, err := r.cfg.ServiceAccounts.ServiceAccount(ctx, pod.Namespace, sa)
		if err != nil {
			r.cfg.Logger.Debug("service account not read for its image pull secrets", "pod", pod.Namespace+"/"+pod.Name, "serviceAccount", sa, "error", err)
		} else {
			add(acct.ImagePullSecrets)
		}
	}
	return names
}

// ClientServiceAccounts reads ServiceAccounts with client (the node's API
// client): one GET a pull, which the Node authorizer allows for the
// ServiceAccounts of pods bound to the node when the API server runs with
// the KubeletServiceAccountTokenForCredentialProviders feature.
func ClientServiceAccounts(client kubernetes.Interface) ServiceAccounts {
	return clientServiceAccounts{client}
}

type clientServiceAccounts struct{ client kubernetes.Interface }

func (c clientServiceAccounts) ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	return c.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}
