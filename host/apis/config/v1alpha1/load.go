package v1alpha1

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// file is the file's form of a WasmletConfiguration: the type itself plus
// the flat names this version also accepts for three settings of the
// authentication and authorization blocks. Decode moves them into the
// blocks; a setting given both ways is an error.
type file struct {
	WasmletConfiguration `json:",inline"`

	ClientCAFile      *string `json:"clientCAFile,omitempty"`      // authentication.x509.clientCAFile
	AnonymousAuth     *bool   `json:"anonymousAuth,omitempty"`     // authentication.anonymous.enabled
	AuthorizationMode *string `json:"authorizationMode,omitempty"` // authorization.mode
}

// LoadFile reads the configuration file at path (see Decode); its errors
// name the file.
func LoadFile(path string) (WasmletConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return WasmletConfiguration{}, fmt.Errorf("config file: %w", err)
	}
	c, err := Decode(b)
	if err != nil {
		return WasmletConfiguration{}, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Decode reads a configuration file's content, YAML or JSON: its kind must
// be Kind, its apiVersion, if given, APIVersion, and an unknown field is an
// error. It neither defaults nor validates: the fields the file leaves out
// stay unset.
func Decode(data []byte) (WasmletConfiguration, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return WasmletConfiguration{}, err
	}
	c := f.WasmletConfiguration
	if c.Kind != Kind {
		return WasmletConfiguration{}, fmt.Errorf("kind is %q, want %q", c.Kind, Kind)
	}
	if c.APIVersion != "" && c.APIVersion != APIVersion {
		return WasmletConfiguration{}, fmt.Errorf("apiVersion is %q, want %q", c.APIVersion, APIVersion)
	}
	var errs field.ErrorList
	if f.ClientCAFile != nil {
		errs = append(errs, fold(&c.Authentication.X509.ClientCAFile, *f.ClientCAFile, c.Authentication.X509.ClientCAFile != "",
			"clientCAFile", "authentication.x509.clientCAFile")...)
	}
	if f.AnonymousAuth != nil {
		errs = append(errs, fold(&c.Authentication.Anonymous.Enabled, f.AnonymousAuth, c.Authentication.Anonymous.Enabled != nil,
			"anonymousAuth", "authentication.anonymous.enabled")...)
	}
	if f.AuthorizationMode != nil {
		errs = append(errs, fold(&c.Authorization.Mode, kubeletconfig.KubeletAuthorizationMode(*f.AuthorizationMode), c.Authorization.Mode != "",
			"authorizationMode", "authorization.mode")...)
	}
	return c, errs.ToAggregate()
}

// fold sets a block's field to the value given under its flat name, or
// when the block gives it too, returns the error naming both.
func fold[T any](block *T, v T, blockGiven bool, flat, blockPath string) field.ErrorList {
	if blockGiven {
		return field.ErrorList{field.Forbidden(field.NewPath(flat), "the same setting as "+blockPath+": give one")}
	}
	*block = v
	return nil
}
