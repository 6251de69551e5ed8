//go:build !wasip1

package policy

import (
	"fmt"
	"testing"

	"github.com/wasmlet/wasmlet/sdk"
)

func use(t *testing.T, config map[string]string) {
	prev := sdk.UseNativeHost(&sdk.NativeHost{Config: config})
	t.Cleanup(func() { sdk.UseNativeHost(prev) })
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string]string{
		"":               "[]",
		"a, b,,c":        "[a b c]",
		"a\nb, c\n\n d ": "[a b c d]",
	} {
		if got := fmt.Sprint(SplitList(in)); got != want {
			t.Errorf("SplitList(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestBool(t *testing.T) {
	use(t, map[string]string{"y": "Yes", "n": "0", "bad": "maybe"})
	tests := []struct {
		key  string
		def  bool
		want bool
		err  bool
	}{{"y", false, true, false}, {"n", true, false, false}, {"absent", true, true, false}, {"bad", true, true, true}}
	for _, tt := range tests {
		got, err := Bool(tt.key, tt.def)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("Bool(%q) = %v, %v", tt.key, got, err)
		}
	}
}

func TestPairs(t *testing.T) {
	use(t, map[string]string{"env": "A=1\n# c\n\nB = x=y\n", "bad": "A=1\nnope"})
	got, err := Pairs("env")
	if err != nil || fmt.Sprint(got) != "[[A 1] [B  x=y]]" {
		t.Fatalf("Pairs = %q, %v", got, err)
	}
	if _, err := Pairs("bad"); err == nil {
		t.Fatal("a line without = is accepted")
	}
	if got, err := Pairs("absent"); got != nil || err != nil {
		t.Fatalf("absent: %v %v", got, err)
	}
}

func TestExempt(t *testing.T) {
	use(t, map[string]string{"exemptNamespaces": "a, b"})
	if !Exempt("b", "") || Exempt("c", "c") {
		t.Fatal("config exemptNamespaces not used")
	}
	use(t, nil)
	if !Exempt("kube-system", "kube-system") {
		t.Fatal("default not used")
	}
}
