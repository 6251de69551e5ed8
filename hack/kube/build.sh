#!/usr/bin/env bash
# Builds Kubernetes programs (k8s.io/kubernetes $VERSION) from the Go module
# proxy through this nested module and caches each binary by version, so a
# machine builds each at most once:
#   ${WASMLET_CACHE:-~/.cache/wasmlet}/NAME/$VERSION/NAME
#
#   hack/kube/build.sh NAME...   prints each binary's path on stdout, one a line
#
# NAME is kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kubelet, kubemark (the hollow node of make bench-fleet), e2e.test or e2e_node.test (the upstream e2e and node e2e suites,
# `go test -c`), agnhost or nnp
# (the programs of the suite's agnhost and nonewprivs images, static). One build at a time: the first cold
# build takes ~9 min on 2 cores (e2e.test ~12 min); later ones reuse the Go
# build cache (kube-scheduler seconds, kube-controller-manager ~1 min).
set -euo pipefail

VERSION=v1.36.3
here=$(cd "$(dirname "$0")" && pwd)
minor=${VERSION#v1.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
[ $# -gt 0 ] || { echo "usage: build.sh NAME..." >&2; exit 2; }

for name in "$@"; do
	cache=${WASMLET_CACHE:-$HOME/.cache/wasmlet}/$name/$VERSION
	bin=$cache/$name
	# A finished build is renamed into place, so its presence is the check
	# (kube-apiserver also answers --version, kept from the first script).
	if [[ -x $bin ]]; then
		echo "$bin"
		continue
	fi
	mkdir -p "$cache"
	start=$(date +%s)
	echo "building $name $VERSION into $cache" >&2
	cd "$here"
	case $name in
	kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kubelet | kubemark)
		GOWORK=off GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags "$ldflags" \
			-o "$bin.tmp" "k8s.io/kubernetes/cmd/$name"
		;;
	e2e.test | e2e_node.test)
		GOWORK=off GOFLAGS=-mod=readonly nice -n 10 go test -c -trimpath -ldflags "$ldflags" \
			-o "$bin.tmp" "k8s.io/kubernetes/test/${name%.test}"
		;;
	agnhost | nnp)
		pkg=k8s.io/kubernetes/test/images/agnhost
		[ "$name" = nnp ] && pkg=k8s.io/kubernetes/test/images/nonewprivs
		CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags "-s -w" \
			-o "$bin.tmp" "$pkg"
		;;
	*)
		echo "build.sh: unknown program $name" >&2
		exit 2
		;;
	esac
	mv "$bin.tmp" "$bin"
	echo "built $name in $(( $(date +%s) - start )) s" >&2
	echo "$bin"
done
