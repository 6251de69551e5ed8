# wasmlet — see README.md. Two commands set everything up on a fresh machine:
#   make run    the agent with the example plugin directory
#   make test   every test, end-to-end ones included (installs what they need)
GO       ?= go
BIN      := bin
OUT      := build
PKGS     := ./...
BENCHTIME ?= 1s
# The Go modules of this repository: the host (root), the plugin ABI, the Go
# SDK and its native test helper, the first-party plugins and the examples.
# A plugin's module holds only abi, sdk and sdk/sdktest; the others build
# against this tree's copies through replace directives (no go.work).
# hack/kube is a build tool for Kubernetes binaries, not listed.
MODULES  := . abi sdk sdk/sdktest plugins examples/plugins
# each CMD: run CMD in every module, stopping at the first failure.
each = @set -e; for m in $(MODULES); do echo "== $$m: $(1)"; (cd $$m && $(1)); done

.PHONY: all build plugins deps run test test-steps unit e2e conformance node-conformance cri-diff bench bench-node bench-eviction bench-fleet check fmt vet tidy clean

all: build plugins

deps:
	./hack/install-deps.sh

# The commit `wasmlet version` reports. The go command stamps it (vcs.revision,
# vcs.modified) only in a plain clone, not in a git worktree (its .git is a
# file) nor under GOFLAGS=-buildvcs=false, so it is also passed with -X; both
# are empty outside a git checkout.
COMMIT    = $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED  = $(shell [ -n "$$(git status --porcelain 2>/dev/null)" ] && echo true)

build:
	$(GO) build -trimpath -ldflags "-s -w -X main.commit=$(COMMIT) -X main.modified=$(MODIFIED)" -o $(BIN)/wasmlet ./cmd/wasmlet

# Every plugin under plugins/ and examples/ (GOOS=wasip1 GOARCH=wasm
# -buildmode=c-shared for Go, clang --target=wasm32-wasi for C), each with a
# manifest whose sha256 matches, into $(OUT)/plugins.
plugins: deps
	./hack/build-plugins.sh $(OUT)/plugins

run: deps build plugins
	./hack/run.sh

# Unit tests, then the end-to-end suites against real runtimes.
test: deps build plugins
	@$(MAKE) --no-print-directory test-steps

# The steps of test without its prerequisites: every step runs even when
# one before it failed (a failing unit test hides no e2e suite), and the
# target fails at the end naming the steps that failed.
E2E          ?= ./hack/e2e.sh
E2E_APISERVER ?= ./hack/e2e-apiserver.sh
test-steps:
	@failed=""; \
	for m in $(MODULES); do \
		echo "== $$m: $(GO) test -count=1 $(PKGS)"; \
		(cd $$m && $(GO) test -count=1 $(PKGS)) || failed="$$failed unit($$m)"; \
	done; \
	echo "== $(E2E)"; $(E2E) || failed="$$failed e2e"; \
	echo "== $(E2E_APISERVER)"; $(E2E_APISERVER) || failed="$$failed e2e-apiserver"; \
	if [ -n "$$failed" ]; then echo "make test: failed:$$failed"; exit 1; fi; \
	echo "make test: all steps passed"

unit: deps build plugins
	$(call each,$(GO) test -count=1 $(PKGS))

e2e: deps build plugins
	./hack/e2e.sh

# The upstream specs of test/e2e/common, [NodeConformance] and [Conformance]
# (TAGS=both|node|conformance), against wasmlet, the kubelet or both
# (NODE=wasmlet|kubelet|both, FOCUS=, SKIP=, PARALLEL=): hours, not part of
# make test. See the README's "Conformance" section.
conformance: deps build
	SUITE=e2e ./hack/conformance.sh

# Kubernetes' node conformance test: the [NodeConformance] specs of
# test/e2e_node against a node the harness starts (the same variables as
# conformance): hours, not part of make test.
node-conformance: deps build
	SUITE=e2e_node ./hack/conformance.sh

# The CRI sandbox and container configs the kubelet and wasmlet send for
# the same static pods, compared field by field (hack/cri-diff.sh): needs
# the kubelet v1.36.3 (built once, cached), not part of make test.
cri-diff: deps build
	./hack/cri-diff.sh

bench: deps build plugins
	$(call each,$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS))

# A burst of static pods on a private containerd under wasmlet and the real
# kubelet, alternately (PODS=1,10,30,100 ROUNDS=2): the start and stop
# figures side by side with the load average. Minutes; not part of make test.
bench-node: deps build
	./hack/bench-node.sh

# NODES wasmlet agents on the embedded runtime, then NODES kubemark hollow
# kubelets, on one control plane on loopback: what a node costs the API
# server, pod start latency, lease renewals, a plugin's rollout to the
# fleet (hack/bench-fleet.sh). Tens of minutes at 100; not part of make test.
NODES         ?= 100
PODS_PER_NODE ?= 5
ROUNDS        ?= 1
bench-fleet: deps build
	NODES=$(NODES) PODS_PER_NODE=$(PODS_PER_NODE) ROUNDS=$(ROUNDS) ./hack/bench-fleet.sh

# Node-pressure eviction under wasmlet and the real kubelet, joined in turn
# to a throwaway control plane on one private containerd (ROUNDS=3): the
# time from memory.available crossing the hard threshold to the pod
# evicted, and the agents' CPU and RSS with 30 pods while eviction and
# image GC run. About 20 min; not part of make test.
bench-eviction: deps build
	./hack/eviction-figures.sh

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(call each,$(GO) vet $(PKGS))

# Tidies every module; fails when that changed a go.mod or go.sum.
tidy:
	$(call each,$(GO) mod tidy)
	@git diff --exit-code -- $(foreach m,$(MODULES),$(m)/go.mod $(wildcard $(m)/go.sum)) || (echo "go.mod/go.sum not tidy"; exit 1)

# Format, vet, tidy and test; fails on a dirty tree like wazero's Makefile.
check: fmt vet tidy test
	@if [ -n "$$(git status --porcelain)" ]; then git status --porcelain; echo "tree is dirty after check"; exit 1; fi

clean:
	rm -rf $(BIN) $(OUT)
