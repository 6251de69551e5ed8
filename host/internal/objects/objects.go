// Package objects is where a pod's data comes from: the ConfigMaps and
// Secrets its volumes and env name, the service-account tokens its
// projected volumes ask for, and the Services whose environment variables
// its containers get. In a cluster they come from the API server with the
// node's own credentials (a watch per referenced object, as the kubelet's
// watch-based managers do, so a pod sync reads a cache, not the API
// server); a standalone node reads ConfigMaps and Secrets from a local
// directory and has no tokens or Services.
//
// Cluster is the implementation for a node with an API server (NewCluster),
// Local the one for a standalone node (NewLocal).
//
// # The standalone objects directory
//
// A standalone node's ConfigMaps and Secrets come from the directory given
// as --pod-objects-dir. Without one, every ConfigMap and Secret is missing:
// lookups fail with a NotFound error saying the node is standalone, naming
// the object and that --pod-objects-dir provides them.
//
// The directory holds files named *.yaml, *.yml or *.json (names starting
// with a dot are ignored, as are subdirectories, FIFOs, sockets and devices;
// symbolic links to regular files are followed). Each file holds one or
// more YAML documents separated by "---" lines (JSON is YAML too), each a
// complete manifest as kubectl would apply it:
//
//	apiVersion: v1
//	kind: ConfigMap
//	metadata:
//	  name: web-config
//	  namespace: shop        # "default" when left out
//	data:
//	  greeting: hello
//	---
//	apiVersion: v1
//	kind: Secret
//	metadata:
//	  name: web-token
//	data:
//	  token: c2VjcmV0        # base64, as usual
//	stringData:
//	  user: admin            # merged into data, as the API server does
//
// Only kind ConfigMap and Secret of apiVersion v1 are accepted, and fields
// those kinds lack are errors. A file with any bad document is skipped as a
// whole and logged (once per change of the file), naming the file and the
// error; the other files are still served. When two files define the same
// kind, namespace and name, the first file in lexical order wins and the
// duplicate is logged naming both. The directory is looked at again at
// most every 2 seconds, as lookups happen, and re-parsed when a file was
// added, removed or changed (size or modification time).
package objects

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Source gives the ConfigMaps and Secrets of the pods on the node.
//
// A pod is registered (RegisterPod) before its volumes are set up or its
// containers' env is resolved, and unregistered once it is gone; the
// source keeps what registered pods reference up to date (watches them)
// and drops an object when no registered pod references it any more.
// ConfigMap and Secret may be called for objects no registered pod
// references (they are then fetched once).
type Source interface {
	// RegisterPod records the ConfigMaps and Secrets pod references (its
	// volumes, projected sources, env, envFrom and imagePullSecrets) and
	// starts keeping them up to date. Registering a pod again (an update)
	// replaces what it referenced.
	RegisterPod(pod *v1.Pod)
	// UnregisterPod forgets what the pod referenced.
	UnregisterPod(pod *v1.Pod)
	// ConfigMap returns the named ConfigMap; the caller owns the copy
	// returned. A missing object is an error for which
	// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true and whose text
	// is the API server's (`configmaps "name" not found`) from a Cluster;
	// a Local's names the object and where it looked instead.
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	// Secret returns the named Secret, with ConfigMap's error rules.
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// TokenRequest asks for a service-account token bound to a pod.
type TokenRequest struct {
	// Pod is the pod the token is for (its namespace, service account,
	// name and UID; the token is bound to it).
	Pod *v1.Pod
	// Audience is the token's audience; empty means the API server's.
	Audience string
	// ExpirationSeconds is the requested lifetime (the API server may
	// shorten or lengthen it).
	ExpirationSeconds int64
}

// Token is a service-account token.
type Token struct {
	// Token is the bearer token.
	Token string
	// Expires is when it expires.
	Expires time.Time
}

// Tokens gives service-account tokens through the TokenRequest API,
// cached and refreshed as the kubelet's token manager does: a cached token
// is returned until 80 % of its lifetime has passed (or it is older than
// 24 h), then a new one is requested.
type Tokens interface {
	// Token returns a valid token for req.
	Token(ctx context.Context, req TokenRequest) (Token, error)
	// ForgetPod drops the tokens cached for the pod with uid.
	ForgetPod(uid string)
}

// Services lists the Services of a namespace, for the service environment
// variables (enableServiceLinks) and the master service's
// KUBERNETES_SERVICE_HOST/PORT.
type Services interface {
	// Services returns the Services in namespace (all of them when
	// namespace is ""); a node with no API server returns none.
	Services(namespace string) ([]*v1.Service, error)
}

// as returns a deep copy of obj as a T, or err; a wrong type is an error
// naming k.
func as[T runtime.Object](k objectKey, obj runtime.Object, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	t, ok := obj.DeepCopyObject().(T)
	if !ok {
		return zero, fmt.Errorf("%s: unexpected object type %T", k, obj)
	}
	return t, nil
}
