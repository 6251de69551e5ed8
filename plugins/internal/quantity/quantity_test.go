package quantity

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		parse   func(string) (int64, error)
		in      string
		want    int64
		wantErr string
	}{
		{Bytes, "64Mi", 64 << 20, ""},
		{Bytes, "1Gi", 1 << 30, ""},
		{Bytes, "1.5Gi", 3 << 29, ""},
		{Bytes, "128974848", 128974848, ""},
		{Bytes, "129e6", 0, "decimal number"},
		{Bytes, "129M", 129e6, ""},
		{Bytes, "1k", 1000, ""},
		{Bytes, "0.5", 1, ""}, // rounded up, as resource.Quantity does
		{Bytes, "8Ei", 0, "too large"},
		{Bytes, "100m", 0, "not a memory size"},
		{Bytes, "-1Mi", 0, "negative"},
		{Bytes, "12Xi", 0, `unknown suffix "i"`},
		{Bytes, "Mi", 0, "decimal number"},
		{Bytes, "", 0, "decimal number"},
		{Bytes, "1.Mi", 0, "decimal number"},
		{MilliCPU, "250m", 250, ""},
		{MilliCPU, "2", 2000, ""},
		{MilliCPU, "1.5", 1500, ""},
		{MilliCPU, "0.0001", 1, ""},
		{MilliCPU, "100u", 0, "unknown suffix"},
		{MilliCPU, "two", 0, "decimal number"},
	}
	for _, tt := range tests {
		got, err := tt.parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: %d, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}
