package v1alpha1

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestDecode(t *testing.T) {
	typeMeta := metav1.TypeMeta{Kind: Kind, APIVersion: APIVersion}
	tests := []struct {
		name    string
		in      string
		want    WasmletConfiguration
		wantErr string
	}{
		{"kind only: nothing set", "kind: WasmletConfiguration\n", WasmletConfiguration{TypeMeta: metav1.TypeMeta{Kind: Kind}}, ""},
		{"JSON", `{"kind": "WasmletConfiguration", "apiVersion": "wasmlet.io/v1alpha1", "maxPods": 7, "syncFrequency": "5s"}`,
			WasmletConfiguration{TypeMeta: typeMeta, MaxPods: 7, SyncFrequency: dur(5 * time.Second)}, ""},
		{"zero values are set", "kind: WasmletConfiguration\nreadOnlyPort: 0\npluginIdleTimeout: 0s\ncgroupsPerQOS: false\nresolvConf: \"\"\n",
			WasmletConfiguration{TypeMeta: metav1.TypeMeta{Kind: Kind}, ReadOnlyPort: ptr.To(0), PluginIdleTimeout: &metav1.Duration{},
				CgroupsPerQOS: ptr.To(false), ResolvConf: ptr.To("")}, ""},
		{"flat names go into the blocks", "kind: WasmletConfiguration\nclientCAFile: /ca\nanonymousAuth: true\nauthorizationMode: Webhook\n",
			WasmletConfiguration{TypeMeta: metav1.TypeMeta{Kind: Kind},
				Authentication: kubeletconfig.KubeletAuthentication{
					X509: kubeletconfig.KubeletX509Authentication{ClientCAFile: "/ca"}, Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(true)}},
				Authorization: kubeletconfig.KubeletAuthorization{Mode: "Webhook"}}, ""},
		{"client CA twice", "kind: WasmletConfiguration\nclientCAFile: /a\nauthentication: {x509: {clientCAFile: /b}}\n", WasmletConfiguration{},
			"clientCAFile: Forbidden: the same setting as authentication.x509.clientCAFile"},
		{"anonymous twice", "kind: WasmletConfiguration\nanonymousAuth: false\nauthentication: {anonymous: {enabled: false}}\n", WasmletConfiguration{},
			"anonymousAuth: Forbidden: the same setting as authentication.anonymous.enabled"},
		{"mode twice", "kind: WasmletConfiguration\nauthorizationMode: Webhook\nauthorization: {mode: Webhook}\n", WasmletConfiguration{},
			"authorizationMode: Forbidden: the same setting as authorization.mode"},
		{"no kind", "maxPods: 7\n", WasmletConfiguration{}, `kind is "", want "WasmletConfiguration"`},
		{"other kind", "kind: KubeletConfiguration\n", WasmletConfiguration{}, `kind is "KubeletConfiguration"`},
		{"other version", "kind: WasmletConfiguration\napiVersion: wasmlet.io/v1\n", WasmletConfiguration{}, `apiVersion is "wasmlet.io/v1", want "wasmlet.io/v1alpha1"`},
		{"unknown field", "kind: WasmletConfiguration\nstaticPodPaht: /x\n", WasmletConfiguration{}, `unknown field "staticPodPaht"`},
		{"unknown field in a block", "kind: WasmletConfiguration\nauthorization: {mdoe: Webhook}\n", WasmletConfiguration{}, `unknown field "mdoe"`},
		{"bad duration", "kind: WasmletConfiguration\nsyncFrequency: soon\n", WasmletConfiguration{}, "soon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.in))
			if checkError(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", asJSON(got), asJSON(tt.want))
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "wasmlet.yaml")
	if err := os.WriteFile(p, []byte("kind: WasmletConfiguration\nmaxPods: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadFile(p); err != nil || c.MaxPods != 3 {
		t.Errorf("LoadFile = %+v, %v", c, err)
	}
	if err := os.WriteFile(p, []byte("kind: Pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(p); err == nil || !strings.HasPrefix(err.Error(), "config file "+p+": kind is") {
		t.Errorf("a wrong kind: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}
