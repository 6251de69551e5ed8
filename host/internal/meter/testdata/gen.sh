#!/bin/sh
# Rebuilds host/meter's test fixtures (wat2wasm from hack/install-deps.sh).
set -e
cd "$(dirname "$0")"
for f in *.wat; do wat2wasm "$f" -o "${f%.wat}.wasm"; done
