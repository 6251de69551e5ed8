// Package main does not compile, on purpose: TestBuild_Error checks that
// Build reports the compiler's message.
package main

func main() { undefinedFunction() }
