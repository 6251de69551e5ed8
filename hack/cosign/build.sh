#!/usr/bin/env bash
# Builds cosign $VERSION from the Go module proxy and caches the binary by
# version, so a machine builds it at most once:
#   ${WASMLET_CACHE:-~/.cache/wasmlet}/cosign/$VERSION/cosign
#
#   hack/cosign/build.sh   prints the binary's path on stdout
#
# The plugin signing e2e suite (cmd/wasmlet/e2eregistry) runs it against the
# private registry: `cosign sign` and `cosign verify` on the artifacts that
# `wasmlet plugin sign` and `wasmlet plugin verify` read and write. A cold
# build takes ~150 s on 2 cores.
set -euo pipefail

VERSION=v2.6.5
cache=${WASMLET_CACHE:-$HOME/.cache/wasmlet}/cosign/$VERSION
bin=$cache/cosign
# A finished build is renamed into place, so its presence is the check.
if [[ -x $bin ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$cache/tmp"
start=$(date +%s)
echo "building cosign $VERSION into $cache" >&2
# go install names the binary after the command; build into a scratch
# directory, then rename, so an interrupted build leaves nothing behind.
(cd "$cache/tmp" && GOWORK=off GOFLAGS=-mod=mod GOBIN="$cache/tmp" nice -n 10 \
	go install -trimpath -ldflags "-s -w" "github.com/sigstore/cosign/v2/cmd/cosign@$VERSION")
mv "$cache/tmp/cosign" "$bin"
rmdir "$cache/tmp" 2>/dev/null || true
echo "built cosign in $(( $(date +%s) - start )) s" >&2
echo "$bin"
