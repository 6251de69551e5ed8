package podenv

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestFromServices(t *testing.T) {
	twoPorts := service("ns1", "my-svc", "10.96.0.20",
		v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
		v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP},
	)
	for _, tc := range []struct {
		name string
		svcs []*v1.Service
		want []EnvVar
	}{
		{"two ports", []*v1.Service{twoPorts}, []EnvVar{
			{"MY_SVC_SERVICE_HOST", "10.96.0.20"},
			{"MY_SVC_SERVICE_PORT", "80"},
			{"MY_SVC_SERVICE_PORT_HTTP", "80"},
			{"MY_SVC_SERVICE_PORT_DNS_UDP", "53"},
			{"MY_SVC_PORT", "tcp://10.96.0.20:80"},
			{"MY_SVC_PORT_80_TCP", "tcp://10.96.0.20:80"},
			{"MY_SVC_PORT_80_TCP_PROTO", "tcp"},
			{"MY_SVC_PORT_80_TCP_PORT", "80"},
			{"MY_SVC_PORT_80_TCP_ADDR", "10.96.0.20"},
			{"MY_SVC_PORT_53_UDP", "udp://10.96.0.20:53"},
			{"MY_SVC_PORT_53_UDP_PROTO", "udp"},
			{"MY_SVC_PORT_53_UDP_PORT", "53"},
			{"MY_SVC_PORT_53_UDP_ADDR", "10.96.0.20"},
		}},
		{"unnamed port, no protocol, IPv6", []*v1.Service{service("ns1", "v6", "fd00::10", v1.ServicePort{Port: 8080})}, []EnvVar{
			{"V6_SERVICE_HOST", "fd00::10"},
			{"V6_SERVICE_PORT", "8080"},
			{"V6_PORT", "tcp://[fd00::10]:8080"},
			{"V6_PORT_8080_TCP", "tcp://[fd00::10]:8080"},
			{"V6_PORT_8080_TCP_PROTO", "tcp"},
			{"V6_PORT_8080_TCP_PORT", "8080"},
			{"V6_PORT_8080_TCP_ADDR", "fd00::10"},
		}},
		{"headless and unset skipped", []*v1.Service{
			service("ns1", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 1}),
			service("ns1", "pending", "", v1.ServicePort{Port: 1}),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromServices(tc.svcs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}
