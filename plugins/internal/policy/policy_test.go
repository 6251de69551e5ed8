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

func TestList(t *testing.T) {
	use(t, map[string]string{"l": "a, b"})
	first := List("l", "x")
	if fmt.Sprint(first) != "[a b]" || !ListSet("l", "x")["b"] || ListSet("l", "x")["x"] {
		t.Fatalf("List = %v, ListSet = %v", first, ListSet("l", "x"))
	}
	_ = append(first, "c") // a caller appending must not change the cached list
	if again := List("l", "x"); fmt.Sprint(again) != "[a b]" || &again[0] != &first[0] {
		t.Fatalf("second List = %v (cached: %v)", again, &again[0] == &first[0])
	}
	use(t, map[string]string{"l": "c"}) // a changed value is parsed afresh
	if got := List("l", "x"); fmt.Sprint(got) != "[c]" || !ListSet("l", "x")["c"] || ListSet("l", "x")["a"] {
		t.Fatalf("after a change List = %v, ListSet = %v", got, ListSet("l", "x"))
	}
	use(t, nil)
	if got := List("l", "x"); fmt.Sprint(got) != "[x]" {
		t.Fatalf("absent: List = %v, want the default", got)
	}
}

// TestList_Bundle checks that the helpers read each bundle policy's own
// keys, falling back to the plain key, and that the list cache keeps one
// entry per policy: policies of a bundle called in turn neither see each
// other's lists nor split them again at every call.
func TestList_Bundle(t *testing.T) {
	use(t, map[string]string{
		"a.allowed":          "x, y",
		"b.allowed":          "z",
		"exemptNamespaces":   "shared",
		"a.exemptNamespaces": "own",
		"b.strict":           "no",
	})
	type seen struct {
		list   []string
		exempt [2]bool // shared, own
		strict bool
	}
	got := map[string][]seen{}
	policyOf := func(name string) sdk.Policy {
		return sdk.Policy{Name: name, Reads: sdk.Reads(0), Admitter: admitFunc(func(sdk.AdmitRequest) (sdk.Verdict, error) {
			strict, err := Bool("strict", true)
			if err != nil {
				return sdk.Verdict{}, err
			}
			got[name] = append(got[name], seen{List("allowed", "def"), [2]bool{Exempt("shared", ""), Exempt("own", "")}, strict})
			return sdk.Allow(), nil
		})}
	}
	b := sdk.NewBundle(policyOf("a"), policyOf("b"), policyOf("c"))
	for i := 0; i < 2; i++ {
		if v, err := b.Admit(sdk.AdmitRequest{}); !v.Allowed || err != nil {
			t.Fatalf("round %d: %+v %v", i, v, err)
		}
	}
	for name, want := range map[string]seen{
		"a": {[]string{"x", "y"}, [2]bool{false, true}, true},
		"b": {[]string{"z"}, [2]bool{true, false}, false},
		"c": {[]string{"def"}, [2]bool{true, false}, true},
	} {
		rounds := got[name]
		if len(rounds) != 2 {
			t.Fatalf("%s ran %d times", name, len(rounds))
		}
		for _, r := range rounds {
			if fmt.Sprint(r.list) != fmt.Sprint(want.list) || r.exempt != want.exempt || r.strict != want.strict {
				t.Errorf("%s saw %+v, want %+v", name, r, want)
			}
		}
		if &rounds[0].list[0] != &rounds[1].list[0] {
			t.Errorf("%s: its list was split again in the second round", name)
		}
	}
	if got := List("allowed", "def"); fmt.Sprint(got) != "[def]" {
		t.Errorf("outside the bundle List = %v, want the default", got)
	}
}

type admitFunc func(sdk.AdmitRequest) (sdk.Verdict, error)

func (f admitFunc) Admit(r sdk.AdmitRequest) (sdk.Verdict, error) { return f(r) }
