#!/bin/sh
# Rebuilds host/internal/pluginhost's test fixtures (tools from hack/install-deps.sh).
# Run from host/internal/pluginhost: go generate (or sh testdata/gen.sh).
set -e
cd "$(dirname "$0")"
for f in wat/*.wat; do wat2wasm "$f" -o "${f%.wat}.wasm"; done
for f in c/*.c; do
	clang-14 --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor -Wl,--strip-all -o "${f%.c}.wasm" "$f"
done
