#!/usr/bin/env bash
# The apiserver end-to-end suite (cmd/wasmlet/e2eapi), as `make test` runs
# it after hack/e2e.sh; also runnable alone. For each runtime it
#   1. starts a fresh control plane on loopback (hack/apiserver/cluster.sh:
#      etcd + a real kube-apiserver v1.36.3, built once per machine and cached
#      by version by hack/kube-apiserver/build.sh) and a node certificate;
#   2. starts the runtime: the embedded WASI runtime as a standalone
#      `wasmlet runtime` (so the agent can restart without killing pods), or
#      a private containerd (hack/containerd/up.sh) with the testbox and
#      pause images;
#   3. runs the suite: wasmlet with the NODE certificate, checks through an
#      admin client;
#   4. tears everything down from a trap.
#
# Environment: E2E_RUNTIMES (default "embedded containerd"), E2E_RUN (a -run
# pattern), E2E_TIMEOUT (default 20m), KEEP_BASE=1 keeps logs.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/e2e
runtimes=${E2E_RUNTIMES:-embedded containerd}
node=wasmlet-e2e
mkdir -p "$out/bin" "$out/images"
log() { printf 'e2e-apiserver: %s %s\n' "$(date +%T)" "$*" >&2; }

log "kube-apiserver (cached by version)"
kas=$(hack/kube-apiserver/build.sh)
log "building bin/wasmlet, tools and the suite"
make --no-print-directory build
go build -o "$out/bin/mkimage" ./hack/mkimage
go build -o "$out/bin/cri" ./hack/containerd/cri
go test -c -tags e2e_apiserver -o "$out/bin/e2eapi.test" ./cmd/wasmlet/e2eapi

base=$(mktemp -d /tmp/wla.XXXX)
status=0
cleanup() {
  local rc=$?
  set +e
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "^$repo/bin/wasmlet .*$base/"; then
      kill -KILL "${p#/proc/}" 2>/dev/null
    fi
  done
  [ -f "$base/ctrd/env" ] && hack/containerd/down.sh "$base/ctrd" "$out/bin/cri"
  for d in "$base"/cluster-*; do [ -d "$d" ] && hack/apiserver/cluster.sh down "$d"; done
  if [ "${KEEP_BASE:-0}" = 1 ]; then
    log "logs kept in $base"
  else
    awk -v b="$base/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$base"
  fi
  exit $(( rc != 0 ? rc : status ))
}
trap cleanup EXIT
trap 'exit 130' INT TERM

suite() { # RUNTIME ENDPOINT
  local rt=$1 ep=$2 cl=$base/cluster-$1
  log "control plane for $rt"
  KUBE_APISERVER=$kas hack/apiserver/cluster.sh up "$cl"
  hack/apiserver/cluster.sh node "$cl" "$node" >/dev/null
  log "suite against $rt ($ep)"
  mkdir -p "$base/$rt"
  (cd cmd/wasmlet/e2eapi && "$out/bin/e2eapi.test" -test.v -test.count=1 -test.timeout "${E2E_TIMEOUT:-20m}" \
    ${E2E_RUN:+-test.run "$E2E_RUN"} -runtime "$rt" -endpoint "$ep" -wasmlet "$repo/bin/wasmlet" \
    -cluster "$cl" -hack "$repo/hack" -base "$base/$rt" -node "$node") || status=1
  hack/apiserver/cluster.sh down "$cl"
}

for rt in $runtimes; do
  case $rt in
  embedded)
    wasm=$out/testbox.wasm
    GOOS=wasip1 GOARCH=wasm go build -trimpath -o "$wasm" ./examples/workloads/testbox
    rtroot=$base/embedded/rt
    mkdir -p "$rtroot"
    bin/wasmlet runtime import --root-dir "$rtroot" wasmlet.local/testbox:1.0 "$wasm" >/dev/null
    ep=unix://$base/embedded/rt.sock
    "$repo/bin/wasmlet" runtime --root-dir "$rtroot" --listen "$ep" >"$base/embedded/runtime.log" 2>&1 &
    rtpid=$!
    if ! "$out/bin/cri" -e "$ep" -timeout 30s wait; then
      log "embedded runtime did not start"; tail -n 20 "$base/embedded/runtime.log" >&2
      status=1; continue
    fi
    suite embedded "$ep"
    kill -TERM "$rtpid" 2>/dev/null; wait "$rtpid" 2>/dev/null || true
    ;;
  containerd)
    log "images"
    rootfs=$base/rootfs
    mkdir -p "$rootfs/pause" "$rootfs/testbox"
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/pause/pause" ./hack/pause
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/testbox/testbox" ./examples/workloads/testbox
    "$out/bin/mkimage" -o "$base/pause.tar" -ref wasmlet.local/pause:1.0 -entrypoint /pause "$rootfs/pause"
    "$out/bin/mkimage" -o "$base/testbox.tar" -ref wasmlet.local/testbox:1.0 -entrypoint /testbox "$rootfs/testbox"
    ep=$(hack/containerd/up.sh "$base/ctrd" wasmlet.local/pause:1.0)
    for i in pause testbox; do
      ctr --address "$base/ctrd/c.sock" -n k8s.io images import "$base/$i.tar" >/dev/null
    done
    "$out/bin/cri" -e "$ep" -timeout 30s wait
    suite containerd "$ep"
    hack/containerd/down.sh "$base/ctrd" "$out/bin/cri"
    ;;
  *) log "unknown runtime $rt"; status=1 ;;
  esac
done
exit $status
