//go:build wasip1

package sdk

import "runtime/debug"

// guestGCPercent is the Go guest's GC target. A call leaves ~12 KB of
// garbage, so at Go's default (100: a 4 MB heap goal at least) a policy
// collects every ~340 calls and about one admission chain of four policies
// in a hundred pays a guest GC: the chain's p99. Doubling the target halves
// that, for ~4 MB more resident per busy instance; an idle plugin's
// instances are given back by the host anyway. See RATIONALE.md.
const guestGCPercent = 200

func init() { debug.SetGCPercent(guestGCPercent) }
