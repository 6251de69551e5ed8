package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// asJSON shows c in a test's failure.
func asJSON(c WasmletConfiguration) string {
	b, err := json.Marshal(c)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// checkError fails t unless err is what a case wants: an error containing
// wantErr, or none when wantErr is empty. It reports whether an error was
// wanted (so the case is done).
func checkError(t *testing.T, err error, wantErr string) bool {
	t.Helper()
	if wantErr == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("error %v, want one containing %q", err, wantErr)
	}
	return true
}
