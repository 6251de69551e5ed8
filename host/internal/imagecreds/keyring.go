package imagecreds

import (
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
)

// Credential is one user name and password (or token) a registry may
// accept, and where it came from.
type Credential struct {
	// Username and Password are the basic credentials.
	Username, Password string
	// IdentityToken and RegistryToken are the token forms a docker config
	// may hold instead.
	IdentityToken, RegistryToken string
	// Source names where the credential came from ("secret ns/name",
	// "credential provider NAME", a file), for messages.
	Source string
}

// Keyring holds the credentials of docker configs under their keys and
// finds those for an image as the kubelet's keyring does: every key that
// matches the image's registry (globs per host label, the same port, the
// key's path a prefix of the image's), the longest key first.
type Keyring struct {
	index []string // keys, reverse lexical order: a longer key of the same prefix first
	creds map[string][]Credential
}

// Add puts the entries of cfg, attributed to source, into the keyring. A
// key may be a URL (https://host/v1/): its scheme and a /v1/ or /v2/ path
// are dropped. Keys that do not parse are left out.
func (k *Keyring) Add(source string, cfg DockerConfig) {
	if k.creds == nil {
		k.creds = map[string][]Credential{}
	}
	for loc, e := range cfg {
		key, ok := normalizeKey(loc)
		if !ok {
			continue
		}
		if _, seen := k.creds[key]; !seen {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], Credential{
			Username: e.Username, Password: e.Password,
			IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken,
			Source: source,
		})
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.index)))
}

// normalizeKey turns a docker config key into host[:port][/path].
func normalizeKey(loc string) (string, bool) {
	v := loc
	if !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// Lookup returns the credentials whose keys match image (a repository
// without tag or digest, such as registry.example.com:5000/team/app), the
// longest key first; for an image of Docker Hub, also those stored under
// index.docker.io when no key matched.
func (k *Keyring) Lookup(image string) []Credential {
	var out []Credential
	for _, key := range k.index {
		if Match(key, image) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDockerHub(image) {
		out = append(out, k.creds["index.docker.io"]...)
	}
	return out
}

// Match reports whether pattern (host[:port][/path], each host label a
// glob such as *.example.com or app*.example.com) matches image: the same
// number of host labels each matching its glob, the same port, and the
// pattern's path a prefix of the image's.
func Match(pattern, image string) bool {
	pu, err := url.Parse("https://" + pattern)
	if err != nil {
		return false
	}
	iu, err := url.Parse("https://" + image)
	if err != nil {
		return false
	}
	pLabels, pPort := splitHost(pu.Host)
	iLabels, iPort := splitHost(iu.Host)
	if pPort != iPort || len(pLabels) != len(iLabels) || !strings.HasPrefix(iu.Path, pu.Path) {
		return false
	}
	for i := range pLabels {
		if ok, err := filepath.Match(pLabels[i], iLabels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// validPattern reports whether pattern parses as [glob.]host[:port][/path]
// with each host label a valid glob.
func validPattern(pattern string) bool {
	u, err := url.Parse("https://" + pattern)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	labels, _ := splitHost(u.Host)
	for _, l := range labels {
		if _, err := filepath.Match(l, ""); l == "" || err != nil {
			return false
		}
	}
	return true
}

// splitHost splits host[:port] into its labels and port.
func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// isDockerHub reports whether a repository is on Docker Hub: no registry
// part (no dot or colon before the first slash), or docker.io /
// index.docker.io.
func isDockerHub(image string) bool {
	first, _, found := strings.Cut(image, "/")
	if first == "" {
		return false
	}
	if !found || first == "docker.io" || first == "index.docker.io" {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}
