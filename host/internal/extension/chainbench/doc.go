// Package bench holds BenchmarkChain: the admission chain of the four
// first-party policies as .wasm plugins against the same checks in native
// Go (see chain_test.go). It has no code of its own.
package bench
