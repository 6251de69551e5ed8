// Command credprovider is a credential provider plugin for the end-to-end
// tests, speaking the kubelet's exec API
// (credentialprovider.kubelet.k8s.io/v1): it reads a
// CredentialProviderRequest on stdin and answers with the user name and
// password of $PROVIDER_USER and $PROVIDER_PASSWORD for the image's
// registry, cached per registry for a minute. Each request's image is
// appended to the file $PROVIDER_LOG.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

func main() {
	var req credentialproviderv1.CredentialProviderRequest
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail("decode request: %v", err)
	}
	if req.APIVersion != credentialproviderv1.SchemeGroupVersion.String() || req.Kind != "CredentialProviderRequest" || req.Image == "" {
		fail("unexpected request %+v", req)
	}
	if f, err := os.OpenFile(os.Getenv("PROVIDER_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, req.Image)
		f.Close()
	}
	registry, _, _ := strings.Cut(req.Image, "/")
	resp := credentialproviderv1.CredentialProviderResponse{
		TypeMeta:      metav1.TypeMeta{APIVersion: credentialproviderv1.SchemeGroupVersion.String(), Kind: "CredentialProviderResponse"},
		CacheKeyType:  credentialproviderv1.RegistryPluginCacheKeyType,
		CacheDuration: &metav1.Duration{Duration: time.Minute},
		Auth: map[string]credentialproviderv1.AuthConfig{
			registry: {Username: os.Getenv("PROVIDER_USER"), Password: os.Getenv("PROVIDER_PASSWORD")},
		},
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		fail("encode response: %v", err)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "credprovider: "+format+"\n", a...)
	os.Exit(1)
}
