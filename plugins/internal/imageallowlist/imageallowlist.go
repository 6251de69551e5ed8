// Package imageallowlist is wasmlet's first-party admission policy that
// lets a pod run only images from allowed registries or repository
// prefixes. The plugins image-allowlist (alone) and policy-bundle (with the
// other first-party policies) run it. Config (in a bundle each key may be
// prefixed "image-allowlist."):
//
//	allowed: "registry.k8s.io, docker.io/library, ghcr.io/acme/"
//	exemptNamespaces: ""
//
// An image reference is normalised as Docker does ("nginx" is
// "docker.io/library/nginx"); an entry matches the registry
// ("registry.k8s.io"), a repository prefix at a path boundary
// ("docker.io/library" matches "docker.io/library/nginx:1" but not
// "docker.io/library2/x"), or, ending in "/", any repository under it. A
// missing "allowed" is an error (the failure policy decides), not "allow
// everything"; "*" allows every image.
//
// The policy checks its config when it is loaded (sdk.ConfigChecker): a host
// that knows the check refuses to load it without "allowed", or with an
// entry that is a URL ("https://ghcr.io") or holds a digest
// ("nginx@sha256:…"), which would never match what the operator meant.
package imageallowlist

import (
	"errors"
	"strconv"
	"strings"

	"github.com/wasmlet/wasmlet/plugins/internal/policy"
	"github.com/wasmlet/wasmlet/sdk"
)

// Policy is the policy as its plugin registers it: named image-allowlist (its
// manifest name), reading only basic fields (images).
func Policy() sdk.Policy {
	return sdk.Policy{Name: "image-allowlist", Admitter: admitter{}, Reads: sdk.Reads(0)}
}

type admitter struct{}

// Admit checks every container's image.
func (admitter) Admit(req sdk.AdmitRequest) (sdk.Verdict, error) {
	pod := &req.Pod
	if policy.Exempt(pod.Namespace, "") {
		return sdk.Allow(), nil
	}
	if _, ok := sdk.Config("allowed"); !ok {
		return sdk.Verdict{}, errors.New("config allowed is not set: list the allowed registries or prefixes")
	}
	allowed := policy.List("allowed", "")
	for _, c := range pod.Spec.AllContainers() {
		if !Allowed(Normalize(c.Image), allowed) {
			return sdk.Deny("ImageNotAllowed", "container "+c.Name+" of pod "+pod.Namespace+"/"+pod.Name+
				" uses image "+c.Image+" from outside the allowed registries ("+strings.Join(allowed, ", ")+")"), nil
		}
	}
	return sdk.Allow(), nil
}

// CheckConfig refuses a config without "allowed", or with an entry that is
// a URL or holds a digest, naming the entry and what to write instead.
func (admitter) CheckConfig() error {
	if _, ok := sdk.Config("allowed"); !ok {
		return errors.New(`config allowed is not set: list the allowed registries or repository prefixes, e.g. "registry.k8s.io, docker.io/library"`)
	}
	for _, a := range policy.List("allowed", "") {
		if scheme, rest, ok := strings.Cut(a, "://"); ok {
			return errors.New("config allowed: entry " + strconv.Quote(a) + " is a URL: write the registry or repository prefix without " +
				scheme + ":// (" + strconv.Quote(rest) + ")")
		}
		if strings.Contains(a, "@") {
			return errors.New("config allowed: entry " + strconv.Quote(a) + " holds a digest: an entry is a registry or repository prefix, which matches every tag and digest under it")
		}
	}
	return nil
}

// Normalize expands an image reference as Docker does: the default registry
// docker.io and, for a single-component name there, "library/".
func Normalize(image string) string {
	first, rest, found := strings.Cut(image, "/")
	if !found || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !found {
			return "docker.io/library/" + image
		}
		return "docker.io/" + image
	}
	if first == "index.docker.io" {
		return "docker.io/" + rest
	}
	return image
}

// Allowed reports whether a normalised reference matches an entry.
func Allowed(ref string, allowed []string) bool {
	for _, a := range allowed {
		if a == "*" {
			return true
		}
		if !strings.Contains(a, "/") && (strings.ContainsAny(a, ".:") || a == "localhost") {
			a += "/" // a registry
		} else {
			a = Normalize(a)
		}
		if strings.HasSuffix(a, "/") {
			if strings.HasPrefix(ref, a) {
				return true
			}
			continue
		}
		if strings.HasPrefix(ref, a) {
			if len(ref) == len(a) {
				return true
			}
			switch ref[len(a)] {
			case '/', ':', '@':
				return true
			}
		}
	}
	return false
}
