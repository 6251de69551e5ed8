#!/usr/bin/env bash
# The apiserver end-to-end suite (cmd/wasmlet/e2eapi), as `make test` runs
# it after hack/e2e.sh; also runnable alone. For each runtime it
#   1. starts a fresh control plane on loopback (hack/apiserver/cluster.sh:
#      etcd + a real kube-apiserver v1.36.3, built once per machine and cached
#      by version by hack/kube/build.sh), the kube-controller-manager's
#      ServiceAccount, token and kube-root-ca.crt controllers (what a pod's
#      default projected volume needs) and a node certificate;
#   2. starts the runtime: the embedded WASI runtime as a standalone
#      `wasmlet runtime` (so the agent can restart without killing pods), or
#      a private containerd (hack/containerd/up.sh) with the testbox and
#      pause images;
#   3. runs the suite: wasmlet with the NODE certificate, checks through an
#      admin client and a real kubectl (hack/kube/build.sh kubectl; the
#      busybox image gives the kubectl cases a shell on containerd);
#   4. tears everything down from a trap.
# Tool and image builds, runtimes and the trap are shared with hack/e2e.sh
# (hack/lib/e2e.sh).
#
# On containerd the control plane is also the TLS bootstrap flavor:
# --enable-bootstrap-token-auth, kube-controller-manager's CSR approving and
# signing controllers, certificates of E2E_SIGNING_DURATION (3m).
#
# Before the runtimes it starts the private registry (hack/registry/up.sh)
# and builds the plugins no-privileged, image-allowlist and validator, for
# TestFleet (WasmletPlugins from deploy/, pulled by the node from the
# registry), TestHookValidator (plugins/validator in a node's plugin
# directory) and TestImagePullSecrets (a private testbox pulled with the API
# server's Secrets; both runtimes trust the registry's CA); E2E_REGISTRY=0
# leaves them out and those tests skip.
#
# Environment: E2E_RUNTIMES (default "embedded containerd"), E2E_RUN (a -run
# pattern), E2E_TIMEOUT (default 20m), KEEP_BASE=1 keeps logs; the control
# plane's ports (APISERVER_PORT 27443, ETCD_PORT 24790, ETCD_PEER_PORT 24800,
# KCM_PORT 27257, SCHEDULER_PORT 27259; cluster.sh's defaults stay free).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/e2e
runtimes=${E2E_RUNTIMES:-embedded containerd}
node=wasmlet-e2e
log() { printf 'e2e-apiserver: %s %s\n' "$(date +%T)" "$*" >&2; }
E2E_BASE_PREFIX=wla
# Ports of their own, so the suite can run while `make conformance` (which
# takes cluster.sh's defaults) holds the others.
export APISERVER_PORT=${APISERVER_PORT:-27443} ETCD_PORT=${ETCD_PORT:-24790} ETCD_PEER_PORT=${ETCD_PEER_PORT:-24800} \
  KCM_PORT=${KCM_PORT:-27257} SCHEDULER_PORT=${SCHEDULER_PORT:-27259}
. hack/lib/e2e.sh
# The control planes suite() started, stopped by the shared trap.
e2e_cleanup_more() {
  for d in "$base"/cluster-*; do [ -d "$d" ] && hack/apiserver/cluster.sh down "$d"; done
  if [ -f "$base/registry/env" ]; then
    hack/registry/down.sh "$base/registry"
  fi
}

log "kube-apiserver and kube-controller-manager (cached by version)"
kas=$(hack/kube/build.sh kube-apiserver)
hack/kube/build.sh kube-controller-manager >/dev/null
kubectl=$(hack/kube/build.sh kubectl)
log "building bin/wasmlet, tools and the suite"
e2e_tools
go test -c -tags e2e_apiserver -o "$out/bin/e2eapi.test" ./cmd/wasmlet/e2eapi

fleet_args=()
if [ "${E2E_REGISTRY:-1}" != 0 ]; then
  log "registry and plugins for TestFleet"
  plugins=build/plugins
  if [ ! -f build/plugins/no-privileged.wasm ] || [ ! -f build/plugins/image-allowlist.wasm ] || [ ! -f build/plugins/validator.wasm ]; then
    plugins=$base/plugins
    ./hack/build-plugins.sh "$plugins" plugins/no-privileged plugins/image-allowlist plugins/validator
  fi
  if hack/registry/up.sh "$base/registry" >/dev/null; then
    fleet_args=(-registry-env "$base/registry/env" -plugins "$repo/$plugins" -deploy "$repo/deploy")
    [[ $plugins = /* ]] && fleet_args[3]=$plugins
    # containerd and the embedded runtime trust the registry's CA
    # (TestImagePullSecrets pulls a private image from it).
    export REGISTRY_ENV=$base/registry/env
  else
    status=1
  fi
fi

suite() { # RUNTIME ENDPOINT [SUITE FLAGS...]
  local rt=$1 ep=$2 cl=$base/cluster-$1
  shift 2
  local controllers=serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller
  local apiflags="" kcmflags=""
  if [[ $rt == containerd ]]; then
    # The TLS bootstrap flavor (TestTLSBootstrap): bootstrap tokens, the
    # CSR approver and signer, certificates of 3 minutes (the smallest
    # lifetime whose 70-90 % rotation deadline is never already past: the
    # signer backdates a short certificate's NotBefore by 5 minutes).
    apiflags=--enable-bootstrap-token-auth
    controllers=$controllers,certificatesigningrequest-approving-controller,certificatesigningrequest-signing-controller
    kcmflags="--cluster-signing-duration=${E2E_SIGNING_DURATION:-3m}"
  fi
  log "control plane for $rt"
  APISERVER_FLAGS=$apiflags KUBE_APISERVER=$kas hack/apiserver/cluster.sh up "$cl"
  KCM_CONTROLLERS=$controllers KCM_FLAGS=$kcmflags SCHEDULER=0 hack/apiserver/cluster.sh controllers "$cl"
  hack/apiserver/cluster.sh node "$cl" "$node" >/dev/null
  log "suite against $rt ($ep)"
  mkdir -p "$base/$rt"
  (cd cmd/wasmlet/e2eapi && "$out/bin/e2eapi.test" -test.v -test.count=1 -test.timeout "${E2E_TIMEOUT:-20m}" \
    ${E2E_RUN:+-test.run "$E2E_RUN"} -runtime "$rt" -endpoint "$ep" -wasmlet "$repo/bin/wasmlet" \
    -cluster "$cl" -hack "$repo/hack" -base "$base/$rt" -node "$node" -kubectl "$kubectl" \
    ${fleet_args[@]+"${fleet_args[@]}"} "$@") || status=1
  hack/apiserver/cluster.sh down "$cl"
}

for rt in $runtimes; do
  case $rt in
  embedded)
    wasm=$(e2e_testbox_wasm)
    e2e_runtime_up embedded "$wasm" || { status=1; continue; }
    suite embedded "$ep" -wasm "$wasm"
    e2e_runtime_down embedded
    ;;
  containerd)
    log "images"
    e2e_images busybox
    e2e_runtime_up containerd pause testbox busybox
    suite containerd "$ep"
    e2e_runtime_down containerd
    ;;
  *) log "unknown runtime $rt"; status=1 ;;
  esac
done
exit $status
