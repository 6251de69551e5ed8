//go:build !wasip1

package sysctlallowlist

import "testing"

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"net/ipv4/ip_local_port_range": "net.ipv4.ip_local_port_range",
		"kernel.shm_rmid_forced":       "kernel.shm_rmid_forced",
		"net.ipv4.conf.eno2/100.rp":    "net.ipv4.conf.eno2/100.rp",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name    string
		allowed []string
		want    bool
	}{
		{"kernel.msgmax", []string{"kernel.msg*"}, true},
		{"kernel.msgmax", []string{"kernel.msg"}, false},
		{"net.core.somaxconn", Safe, false},
		{"net.ipv4.tcp_syncookies", Safe, true},
	}
	for _, tt := range tests {
		if got := Match(tt.name, tt.allowed); got != tt.want {
			t.Errorf("Match(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
