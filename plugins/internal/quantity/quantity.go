// Package quantity parses the Kubernetes resource quantities the
// first-party plugins read from their config ("64Mi", "250m", "1.5"),
// without k8s.io/apimachinery (which a plugin's module does not hold): a
// decimal number and a suffix, binary (Ki … Ei), decimal (k … E) or milli
// (m), as resource.Quantity writes them; exponents ("1e3") are not read.
package quantity

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// scales are the suffixes and what they multiply by, as a fraction
// (numerator, denominator).
var scales = map[string][2]int64{
	"": {1, 1}, "m": {1, 1000},
	"k": {1e3, 1}, "M": {1e6, 1}, "G": {1e9, 1}, "T": {1e12, 1}, "P": {1e15, 1}, "E": {1e18, 1},
	"Ki": {1 << 10, 1}, "Mi": {1 << 20, 1}, "Gi": {1 << 30, 1}, "Ti": {1 << 40, 1}, "Pi": {1 << 50, 1}, "Ei": {1 << 60, 1},
}

// parse returns q × unit, rounded up to an integer, as resource.Quantity
// rounds a value up to its scale.
func parse(q string, unit int64) (int64, error) {
	num := strings.TrimRight(q, "kMGTPEimu")
	suffix := q[len(num):]
	scale, ok := scales[suffix]
	if !ok {
		return 0, fmt.Errorf("quantity %q: unknown suffix %q", q, suffix)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || num == "" || strings.ContainsAny(num, "eE/+") || strings.HasPrefix(num, ".") || strings.HasSuffix(num, ".") {
		return 0, fmt.Errorf("quantity %q: want a decimal number and a suffix, e.g. 64Mi or 250m", q)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("quantity %q: must not be negative", q)
	}
	r.Mul(r, big.NewRat(scale[0]*unit, scale[1]))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if new(big.Rat).SetInt(n).Cmp(r) < 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() || n.Int64() == math.MaxInt64 {
		return 0, fmt.Errorf("quantity %q: too large", q)
	}
	return n.Int64(), nil
}

// Bytes parses a memory quantity into bytes ("64Mi" is 67108864).
func Bytes(q string) (int64, error) {
	if strings.HasSuffix(q, "m") {
		return 0, fmt.Errorf("quantity %q: a thousandth of a byte is not a memory size", q)
	}
	return parse(q, 1)
}

// MilliCPU parses a CPU quantity into thousandths of a CPU ("250m" is 250,
// "1.5" is 1500).
func MilliCPU(q string) (int64, error) { return parse(q, 1000) }
