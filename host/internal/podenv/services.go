package podenv

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmlet/wasmlet/host/internal/config"
)

// masterService is the API server's service, whose variables every pod
// gets (in namespace "default").
const masterService = "kubernetes"

// serviceEnv is the service variables of pod's containers, as the
// kubelet's getServiceEnvVarMap makes them: the master service always,
// and with enableServiceLinks (nil means true) every service of the pod's
// namespace, a service of the pod's namespace replacing the master service
// of the same name. Services without a cluster IP give none. The
// variables are ordered by service name, each service's in
// FromServices order.
func (r *Resolver) serviceEnv(pod *v1.Pod) ([]EnvVar, error) {
	if r.services == nil {
		return nil, nil
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*v1.Service{}
	master, err := r.services.Services(metav1.NamespaceDefault)
	if err == nil {
		for _, s := range master {
			if s.Namespace == metav1.NamespaceDefault && s.Name == masterService && serviceIPSet(s) {
				byName[s.Name] = s
			}
		}
		if links {
			var own []*v1.Service
			if pod.Namespace == metav1.NamespaceDefault {
				own = master
			} else {
				own, err = r.services.Services(pod.Namespace)
			}
			for _, s := range own {
				if s.Namespace == pod.Namespace && serviceIPSet(s) {
					byName[s.Name] = s
				}
			}
		}
	}
	if err != nil {
		if config.IsStatic(pod) {
			// The kubelet does not wait for services to be synced
			// before starting a static pod's containers (the API
			// server may be one of them): it gets what is known.
			err = nil
		} else {
			return nil, fmt.Errorf("failed to list services when setting up env vars: %w", err)
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	services := make([]*v1.Service, len(names))
	for i, n := range names {
		services[i] = byName[n]
	}
	return FromServices(services), nil
}

// serviceIPSet reports whether s has a cluster IP (not "" or "None").
func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != v1.ClusterIPNone && s.Spec.ClusterIP != ""
}

// FromServices is the environment variables that tell a container where
// services are, as the kubelet's envvars.FromServices makes them, in its
// order. For each service with a cluster IP, with NAME its name
// upper-cased and '-' made '_': NAME_SERVICE_HOST, NAME_SERVICE_PORT (the
// first port), NAME_SERVICE_PORT_<PORTNAME> for each named port, then the
// Docker link variables NAME_PORT (the first port's URL) and, per port,
// NAME_PORT_<port>_<PROTO> (its URL, proto://ip:port with an IPv6 address
// bracketed) and that name with _PROTO, _PORT and _ADDR.
func FromServices(services []*v1.Service) []EnvVar {
	var out []EnvVar
	for _, s := range services {
		if !serviceIPSet(s) {
			continue
		}
		prefix := envVarName(s.Name)
		out = append(out, EnvVar{prefix + "_SERVICE_HOST", s.Spec.ClusterIP})
		if len(s.Spec.Ports) == 0 {
			// Validation requires ports of a service with a
			// cluster IP; the kubelet would not cope without.
			continue
		}
		portVar := prefix + "_SERVICE_PORT"
		out = append(out, EnvVar{portVar, strconv.Itoa(int(s.Spec.Ports[0].Port))})
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out = append(out, EnvVar{portVar + "_" + envVarName(p.Name), strconv.Itoa(int(p.Port))})
			}
		}
		out = append(out, linkVars(prefix, s)...)
	}
	return out
}

// linkVars are a service's Docker link variables.
func linkVars(prefix string, s *v1.Service) []EnvVar {
	var out []EnvVar
	for i, p := range s.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		port := strconv.Itoa(int(p.Port))
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(s.Spec.ClusterIP, port)
		if i == 0 {
			out = append(out, EnvVar{prefix + "_PORT", url})
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out = append(out,
			EnvVar{pp, url},
			EnvVar{pp + "_PROTO", strings.ToLower(proto)},
			EnvVar{pp + "_PORT", port},
			EnvVar{pp + "_ADDR", s.Spec.ClusterIP},
		)
	}
	return out
}

// envVarName is a service or port name as part of a variable name.
func envVarName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
