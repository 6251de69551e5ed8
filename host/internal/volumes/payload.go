package volumes

import (
	"context"
	"fmt"
	"io/fs"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wasmlet/wasmlet/host/internal/objects"
	"github.com/wasmlet/wasmlet/host/internal/podenv"
	"github.com/wasmlet/wasmlet/host/internal/podspec"
)

// defaultMode is the mode of a file whose volume and item set none.
const defaultMode fs.FileMode = 0o644

// defaultTokenExpiration is a projected token's lifetime when its source
// sets none (the API's default, one hour).
const defaultTokenExpiration = 3600

func modeOr(m *int32, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m) & 0o777
}

// payloads builds the content of the API-data volumes of a pod.
type payloads struct {
	objects objects.Source
	tokens  objects.Tokens
	node    func() *v1.Node
}

// configMap is a configMap volume's (or projection's) payload; optional
// makes a missing ConfigMap an empty payload and a missing item key
// skipped, as the kubelet does.
func (b payloads) configMap(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, optional *bool, mode fs.FileMode) (Payload, error) {
	cm, err := b.objects.ConfigMap(ctx, pod.Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return Payload{}, nil
		}
		return nil, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keysToPaths(data, items, optional, mode, "configmap references non-existent config key")
}

// secret is a secret volume's (or projection's) payload.
func (b payloads) secret(ctx context.Context, pod *v1.Pod, name string, items []v1.KeyToPath, optional *bool, mode fs.FileMode) (Payload, error) {
	s, err := b.objects.Secret(ctx, pod.Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return Payload{}, nil
		}
		return nil, err
	}
	return keysToPaths(s.Data, items, optional, mode, "references non-existent secret key")
}

// keysToPaths maps data to files: every key when items is empty, else
// each item's key to its path (a missing key fails unless optional).
func keysToPaths(data map[string][]byte, items []v1.KeyToPath, optional *bool, mode fs.FileMode, missing string) (Payload, error) {
	p := Payload{}
	if len(items) == 0 {
		for k, v := range data {
			p[k] = File{Data: v, Mode: mode}
		}
		return p, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return nil, fmt.Errorf("%s: %s", missing, it.Key)
		}
		p[it.Path] = File{Data: v, Mode: modeOr(it.Mode, mode)}
	}
	return p, nil
}

// downwardAPI is a downwardAPI volume's (or projection's) payload.
func (b payloads) downwardAPI(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, mode fs.FileMode) (Payload, error) {
	p := Payload{}
	var node *v1.Node
	if b.node != nil {
		node = b.node()
	}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podenv.FieldValue(pod, it.FieldRef.FieldPath, nil, nil)
		case it.ResourceFieldRef != nil:
			c := podspec.FindContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				err = fmt.Errorf("container %q not found in the pod", it.ResourceFieldRef.ContainerName)
				break
			}
			v, err = podenv.ResourceValue(it.ResourceFieldRef, pod, c, node)
		default:
			err = fmt.Errorf("item %q: neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("downward API item %q: %w", it.Path, err)
		}
		p[it.Path] = File{Data: []byte(v), Mode: modeOr(it.Mode, mode)}
	}
	return p, nil
}

// projected is a projected volume's payload: its sources in order, a later
// source's file replacing an earlier one at the same path.
func (b payloads) projected(ctx context.Context, pod *v1.Pod, src *v1.ProjectedVolumeSource) (Payload, error) {
	mode := modeOr(src.DefaultMode, defaultMode)
	p := Payload{}
	for i, s := range src.Sources {
		var part Payload
		var err error
		switch {
		case s.ConfigMap != nil:
			part, err = b.configMap(ctx, pod, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, mode)
		case s.Secret != nil:
			part, err = b.secret(ctx, pod, s.Secret.Name, s.Secret.Items, s.Secret.Optional, mode)
		case s.DownwardAPI != nil:
			part, err = b.downwardAPI(pod, s.DownwardAPI.Items, mode)
		case s.ServiceAccountToken != nil:
			part, err = b.token(ctx, pod, s.ServiceAccountToken, mode)
		case s.ClusterTrustBundle != nil:
			err = fmt.Errorf("source %d: clusterTrustBundle projections are not supported by this node", i)
		case s.PodCertificate != nil:
			err = fmt.Errorf("source %d: podCertificate projections are not supported by this node", i)
		default:
			err = fmt.Errorf("source %d: no known source set", i)
		}
		if err != nil {
			return nil, err
		}
		for k, v := range part {
			p[k] = v
		}
	}
	return p, nil
}

// token is a serviceAccountToken projection: a token bound to the pod,
// refreshed by the token cache before it expires.
func (b payloads) token(ctx context.Context, pod *v1.Pod, s *v1.ServiceAccountTokenProjection, mode fs.FileMode) (Payload, error) {
	exp := int64(defaultTokenExpiration)
	if s.ExpirationSeconds != nil {
		exp = *s.ExpirationSeconds
	}
	tok, err := b.tokens.Token(ctx, objects.TokenRequest{Pod: pod, Audience: s.Audience, ExpirationSeconds: exp})
	if err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	return Payload{s.Path: {Data: []byte(tok.Token), Mode: mode}}, nil
}
