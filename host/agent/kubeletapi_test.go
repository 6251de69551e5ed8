package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wasmlet/wasmlet/host/apis/config/v1alpha1"
)

// TestAgent_configz: /configz shows the configuration in the
// KubeletConfiguration's names, durations as Go durations.
func TestAgent_configz(t *testing.T) {
	cfg, err := Config{WasmletConfiguration: v1alpha1.WasmletConfiguration{NodeName: "n1", ClusterDomain: "cluster.local"}}.complete()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal((&Agent{cfg: cfg}).configz())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"syncFrequency":"1m0s"`, `"fileCheckFrequency":"20s"`, `"port":10250`, `"readOnlyPort":10255`,
		`"clusterDomain":"cluster.local"`, `"mode":"AlwaysAllow"`, `"webhook":{"cacheTTL":"0s","enabled":false}`, `"rotateCertificates":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in %s", want, b)
		}
	}
}
