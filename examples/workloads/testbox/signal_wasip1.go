//go:build wasip1

package main

// onTerm does nothing on wasip1: WASI has no signals; the embedded runtime
// stops a workload by closing its module.
func onTerm(func()) {}
