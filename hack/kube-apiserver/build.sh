#!/usr/bin/env bash
# Builds a real kube-apiserver (k8s.io/kubernetes $VERSION) from the Go module
# proxy through this nested module and caches the binary by version, so a
# machine builds it at most once:
#   ${WASMLET_CACHE:-~/.cache/wasmlet}/kube-apiserver/$VERSION/kube-apiserver
# Prints the binary's path on stdout. A cold build takes ~9 min on 2 cores.
set -euo pipefail

VERSION=v1.36.3
here=$(cd "$(dirname "$0")" && pwd)
cache=${WASMLET_CACHE:-$HOME/.cache/wasmlet}/kube-apiserver/$VERSION
bin=$cache/kube-apiserver

if [[ -x $bin ]] && "$bin" --version 2>/dev/null | grep -qx "Kubernetes $VERSION"; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
minor=${VERSION#v1.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
echo "building kube-apiserver $VERSION into $cache (cold: ~9 min on 2 cores)" >&2
cd "$here"
GOWORK=off GOFLAGS=-mod=readonly nice -n 10 go build -trimpath \
	-ldflags "-s -w -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
	-o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$bin.tmp" "$bin"
echo "$bin"
