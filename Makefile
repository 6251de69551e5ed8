# wasmlet — see README.md. Two commands set everything up on a fresh machine:
#   make run    the agent with the example plugin directory
#   make test   every test, end-to-end ones included (installs what they need)
GO       ?= go
BIN      := bin
OUT      := build
PKGS     := ./...
BENCHTIME ?= 1s

.PHONY: all build plugins deps run test unit e2e bench check fmt vet tidy clean

all: build plugins

deps:
	./hack/install-deps.sh

build:
	$(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/wasmlet ./cmd/wasmlet

# Every plugin under plugins/ and examples/ (GOOS=wasip1 GOARCH=wasm
# -buildmode=c-shared for Go, clang --target=wasm32-wasi for C), each with a
# manifest whose sha256 matches, into $(OUT)/plugins.
plugins: deps
	./hack/build-plugins.sh $(OUT)/plugins

run: build plugins
	./hack/run.sh

# Unit tests, then the end-to-end suites against real runtimes.
test: deps build plugins
	$(GO) test -count=1 $(PKGS)
	./hack/e2e.sh
	./hack/e2e-apiserver.sh

unit: build plugins
	$(GO) test -count=1 $(PKGS)

e2e: deps build plugins
	./hack/e2e.sh

bench: build plugins
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

tidy:
	$(GO) mod tidy
	@git diff --exit-code go.mod go.sum || (echo "go.mod/go.sum not tidy"; exit 1)

# Format, vet, tidy and test; fails on a dirty tree like wazero's Makefile.
check: fmt vet tidy test
	@if [ -n "$$(git status --porcelain)" ]; then git status --porcelain; echo "tree is dirty after check"; exit 1; fi

clean:
	rm -rf $(BIN) $(OUT)
