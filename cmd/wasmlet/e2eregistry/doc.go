// Package e2eregistry is the end-to-end test of plugins in a registry: it
// drives the built binary (`wasmlet plugin push` and `wasmlet plugin pull`)
// against a real registry — Debian's docker-registry with TLS and htpasswd
// authentication, started by hack/registry/up.sh — as a policy team would.
//
// The test carries the build tag e2e. hack/e2e.sh starts the registry and
// runs
//
//	e2eregistry.test -registry-env DIR/env -wasmlet bin/wasmlet -repo .
//
// before the runtime suites; it takes seconds.
package e2eregistry
