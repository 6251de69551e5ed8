package podenv

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wasmlet/wasmlet/host/internal/objects"
)

// noSource is the end of the error for a reference on a node that has no
// source of ConfigMaps and Secrets.
const noSource = "the node has no source of ConfigMaps and Secrets"

// objectCache fetches the ConfigMaps and Secrets of one namespace for one
// container's environment, each once.
type objectCache struct {
	src        objects.Source
	namespace  string
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// objectCache is an empty cache for namespace.
func (r *Resolver) objectCache(namespace string) *objectCache {
	return &objectCache{
		src:        r.objects,
		namespace:  namespace,
		configMaps: map[string]*v1.ConfigMap{},
		secrets:    map[string]*v1.Secret{},
	}
}

// configMap is the named ConfigMap; nil and no error when it is missing
// and optional.
func (o *objectCache) configMap(ctx context.Context, name string, optional bool) (*v1.ConfigMap, error) {
	if cm, ok := o.configMaps[name]; ok {
		return cm, nil
	}
	if o.src == nil {
		return nil, fmt.Errorf("couldn't get configMap %s/%s: %s", o.namespace, name, noSource)
	}
	cm, err := o.src.ConfigMap(ctx, o.namespace, name)
	if err != nil {
		return nil, objectError(err, "configmap", "configMap", o.namespace, name, optional)
	}
	if cm == nil {
		return nil, objectError(notFound("configmap", name), "configmap", "configMap", o.namespace, name, optional)
	}
	o.configMaps[name] = cm
	return cm, nil
}

// secret is the named Secret; nil and no error when it is missing and
// optional.
func (o *objectCache) secret(ctx context.Context, name string, optional bool) (*v1.Secret, error) {
	if s, ok := o.secrets[name]; ok {
		return s, nil
	}
	if o.src == nil {
		return nil, fmt.Errorf("couldn't get secret %s/%s: %s", o.namespace, name, noSource)
	}
	s, err := o.src.Secret(ctx, o.namespace, name)
	if err != nil {
		return nil, objectError(err, "secret", "secret", o.namespace, name, optional)
	}
	if s == nil {
		return nil, objectError(notFound("secret", name), "secret", "secret", o.namespace, name, optional)
	}
	o.secrets[name] = s
	return s, nil
}

// objectError is the error for a failed fetch: nil for a missing optional
// object; the kubelet's text for a missing one (`configmap "foo" not
// found`, still IsNotFound); otherwise err wrapped, naming the object.
func objectError(err error, resource, kind, namespace, name string, optional bool) error {
	if apierrors.IsNotFound(err) {
		if optional {
			return nil
		}
		return notFound(resource, name)
	}
	return fmt.Errorf("couldn't get %s %s/%s: %w", kind, namespace, name, err)
}

// notFound is the kubelet's NotFound error for an object.
func notFound(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
}

// configMapKey is the value of a configMapKeyRef; false when the optional
// ConfigMap or key is missing.
func (o *objectCache) configMapKey(ctx context.Context, ref *v1.ConfigMapKeySelector) (string, bool, error) {
	optional := isTrue(ref.Optional)
	cm, err := o.configMap(ctx, ref.Name, optional)
	if err != nil || cm == nil {
		return "", false, err
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, o.namespace, ref.Name)
	}
	return v, true, nil
}

// secretKey is the value of a secretKeyRef; false when the optional
// Secret or key is missing.
func (o *objectCache) secretKey(ctx context.Context, ref *v1.SecretKeySelector) (string, bool, error) {
	optional := isTrue(ref.Optional)
	s, err := o.secret(ctx, ref.Name, optional)
	if err != nil || s == nil {
		return "", false, err
	}
	v, ok := secretData(s)[ref.Key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, o.namespace, ref.Name)
	}
	return v, true, nil
}

// secretData is a Secret's data as text. stringData, which the API server
// folds into data, is honoured for a Secret from a local source; it wins
// over data as it does at the API server.
func secretData(s *v1.Secret) map[string]string {
	m := make(map[string]string, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		m[k] = string(v)
	}
	for k, v := range s.StringData {
		m[k] = v
	}
	return m
}
