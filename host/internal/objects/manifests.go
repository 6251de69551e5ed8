package objects

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// parseManifests decodes the ConfigMaps and Secrets of a YAML (or JSON)
// stream of one or more documents separated by "---" lines. Empty
// documents are skipped; anything else that is not a v1 ConfigMap or
// Secret with a name, or has fields those kinds lack, is an error naming
// the document (1-based). Objects without a namespace get "default";
// a Secret's stringData is merged into data, and an empty type becomes
// Opaque, as the API server does.
func parseManifests(data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		obj, err := parseManifest(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
}

// parseManifest decodes one document; an empty one is (nil, nil).
func parseManifest(doc []byte) (runtime.Object, error) {
	var probe map[string]interface{}
	if err := yaml.Unmarshal(doc, &probe); err != nil {
		return nil, err
	}
	if len(probe) == 0 {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion != "v1" {
		return nil, fmt.Errorf("apiVersion %q, want v1", tm.APIVersion)
	}
	var (
		obj  runtime.Object
		meta *metav1.ObjectMeta
	)
	switch tm.Kind {
	case "ConfigMap":
		var cm v1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
			return nil, fmt.Errorf("ConfigMap: %w", err)
		}
		obj, meta = &cm, &cm.ObjectMeta
	case "Secret":
		var s v1.Secret
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return nil, fmt.Errorf("Secret: %w", err)
		}
		if len(s.StringData) > 0 && s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		if s.Type == "" {
			s.Type = v1.SecretTypeOpaque
		}
		obj, meta = &s, &s.ObjectMeta
	default:
		return nil, fmt.Errorf("kind %q, want ConfigMap or Secret", tm.Kind)
	}
	if meta.Name == "" {
		return nil, fmt.Errorf("%s without metadata.name", tm.Kind)
	}
	if meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
	return obj, nil
}

// keyOf is the objectKey of a parsed ConfigMap or Secret.
func keyOf(obj runtime.Object) (objectKey, bool) {
	switch o := obj.(type) {
	case *v1.ConfigMap:
		return objectKey{resConfigMaps, o.Namespace, o.Name}, true
	case *v1.Secret:
		return objectKey{resSecrets, o.Namespace, o.Name}, true
	}
	return objectKey{}, false
}
