package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v2"
)

// yamlToJSON converts a YAML (or JSON) document to JSON as Kubernetes'
// sigs.k8s.io/yaml YAMLToJSON does, on the same parser (go.yaml.in/yaml/v2,
// YAML 1.1): a non-string map key becomes its text, members come out
// sorted by name. JSON goes through unchanged but for that order.
func yamlToJSON(y []byte) ([]byte, error) {
	var obj any
	if err := yaml.Unmarshal(y, &obj); err != nil {
		return nil, err
	}
	obj, err := withStringKeys(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// yamlFloats are the YAML spellings of the floats Go prints otherwise.
var yamlFloats = map[string]string{"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}

// withStringKeys replaces every map[any]any yaml.v2 decoded in v by a
// map[string]any.
func withStringKeys(v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, val := range v {
			var name string
			switch k := k.(type) {
			case string:
				name = k
			case int:
				name = strconv.Itoa(k)
			case int64:
				name = strconv.FormatInt(k, 10)
			case bool:
				name = strconv.FormatBool(k)
			case float64: // as yaml.v2 writes a float
				name = strconv.FormatFloat(k, 'g', -1, 32)
				if yamlName, ok := yamlFloats[name]; ok {
					name = yamlName
				}
			default:
				return nil, fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v", reflect.TypeOf(k), k, val)
			}
			var err error
			if m[name], err = withStringKeys(val); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			var err error
			if a[i], err = withStringKeys(e); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return v, nil
}
