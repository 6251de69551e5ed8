#!/usr/bin/env bash
# make bench-fleet: one control plane on loopback (hack/apiserver/cluster.sh:
# etcd, kube-apiserver with its audit log, kube-controller-manager,
# kube-scheduler), a private registry (hack/registry/up.sh) holding the
# no-privileged plugin, then hack/benchfleet: NODES wasmlet agents on the
# embedded WASI runtime, then NODES kubemark hollow kubelets (v1.36.3, built
# from the Go module proxy and cached), one fleet after the other on the
# same API server, PODS_PER_NODE tiny pods per node, and a WasmletPlugin
# rolled out to the wasmlet fleet. Prints one table, the fleets side by side,
# and writes it to build/bench-fleet/. Not part of make test: minutes at
# NODES=5, tens of minutes at 100. Runs every heavy step itself; run it under
# the machine's heavy-job lock when the machine is shared.
#
#   NODES=100          nodes per fleet
#   PODS_PER_NODE=5    pods created per node
#   ROUNDS=1           rounds (each runs every fleet)
#   FLEETS=wasmlet,kubemark   the fleets, in run order
#   IDLE=120s          the idle window
#   START_RATE=5       agents started per second
#   CREATE_RATE=20     pods created per second
#   SPREAD=NODES*10s   the WasmletPlugin's rollout spread
#   WASMLET_ARGS=...   extra wasmlet run arguments
#   KEEP_BASE=1        keep the state directory (agents' logs, audit log)
# The control plane's ports: APISERVER_PORT 28443, ETCD_PORT 25790,
# ETCD_PEER_PORT 25800, KCM_PORT 28257, SCHEDULER_PORT 28259 (the other
# suites' stay free); the nodes' from PORT_BASE (31000), two per node.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
log() { printf 'bench-fleet: %s %s\n' "$(date +%T)" "$*" >&2; }
# shellcheck source=lib/cleanup.sh
. hack/lib/cleanup.sh
export APISERVER_PORT=${APISERVER_PORT:-28443} ETCD_PORT=${ETCD_PORT:-25790} ETCD_PEER_PORT=${ETCD_PEER_PORT:-25800} \
  KCM_PORT=${KCM_PORT:-28257} SCHEDULER_PORT=${SCHEDULER_PORT:-28259}

# A short base: the agents' unix sockets live under it.
base=$(mktemp -d /tmp/wlf.XXXX)
# What hollow kubelets leave in /tmp whatever TMPDIR says (their roots, their
# fake runtimes' sockets): those there before this run are not ours.
hollow() { ls -d /tmp/hollow-kubelet.* /tmp/kubelet_remote_*.sock 2>/dev/null || true; }
hollow_before=$(hollow)
# Every agent, wasmlet or hollow kubelet, takes a few inotify instances, and
# the kernel's default of 128 per user is for one machine's worth of
# programs: a hundred agents of one user would use them up (wasmlet falls
# back to rescanning its plugin directory, the hollow kubelet's file source
# fails) and leave none to the machine's other programs. The limit is raised
# for the run and put back after.
inotify=/proc/sys/fs/inotify/max_user_instances
inotify_was=$(cat "$inotify")
inotify_want=$(( ${NODES:-100} * 8 + 512 ))
if (( inotify_was < inotify_want )); then
  echo "$inotify_want" >"$inotify"
fi
cleanup() {
  local rc=$?
  set +e
  if (( $(cat "$inotify") != inotify_was )); then echo "$inotify_was" >"$inotify"; fi
  # Agents the tool did not stop (it was killed): every process whose
  # command line names the base.
  kill_matching "$base/"
  hack/apiserver/cluster.sh down "$base/cp"
  hack/registry/down.sh "$base/registry" 2>/dev/null
  umount_under "$base"
  comm -13 <(sort <<<"$hollow_before") <(hollow | sort) | xargs -r rm -rf
  if [ "${KEEP_BASE:-0}" = 1 ]; then
    log "state kept in $base"
  else
    rm -rf --one-file-system "$base"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "programs (Kubernetes ones cached by version)"
make --no-print-directory build
go build -o "$base/benchfleet" ./hack/benchfleet
kas=$(hack/kube/build.sh kube-apiserver)
hack/kube/build.sh kube-controller-manager kube-scheduler >/dev/null
kubectl=$(hack/kube/build.sh kubectl)
kubemark=""
if [[ ${FLEETS:-wasmlet,kubemark} == *kubemark* ]]; then
  kubemark=$(hack/kube/build.sh kubemark)
fi
clang-14 --target=wasm32-wasi --sysroot=/usr -O2 -s -o "$base/idle.wasm" hack/benchfleet/idle/idle.c
plugins=build/plugins
if [ ! -f "$plugins/no-privileged.wasm" ]; then
  plugins=$base/plugins
  ./hack/build-plugins.sh "$plugins" plugins/no-privileged
fi

log "control plane under $base/cp"
KUBE_APISERVER=$kas hack/apiserver/cluster.sh up "$base/cp"
hack/apiserver/cluster.sh controllers "$base/cp"
k() { "$kubectl" --kubeconfig "$base/cp/admin.kubeconfig" "$@"; }
k apply -f deploy/ >/dev/null
k wait --for condition=established crd/wasmletplugins.wasmlet.dev crd/wasmletnodes.wasmlet.dev >/dev/null

log "registry and the plugin"
hack/registry/up.sh "$base/registry" >/dev/null
# shellcheck disable=SC1091
. "$base/registry/env"
mkdir -p "$base/push"
cp "$plugins/no-privileged.wasm" "$plugins/no-privileged.plugin.yaml" "$base/push/"
ref=$REGISTRY/bench/no-privileged:v1
out=$(HOME=$base/push DOCKER_CONFIG=$base/push bin/wasmlet plugin push --registry-config "$REGISTRY_CONFIG" \
  --registry-ca "$REGISTRY_CA" "$base/push" "$ref")
digest=$(grep -o 'sha256:[0-9a-f]\{64\}' <<<"$out" | head -n1)
[ -n "$digest" ] || { log "wasmlet plugin push printed no digest: $out"; exit 1; }
# The rollout's spread: every agent here compiles the plugin on the same
# two cores (about 3 CPU-seconds each) while the idle agents take their
# share of them (most of one at 100 nodes), so by default the fleet takes
# it up over 10 s per node: 3 s a node missed 100 renewals at 100 nodes,
# 10 s a node missed none at 75 and at 100. SPREAD=0s rolls out to every
# node at once.
spread=${SPREAD:-$(( ${NODES:-100} * 10 ))s}
cat >"$base/wasmletplugin.yaml" <<YAML
apiVersion: wasmlet.dev/v1alpha1
kind: WasmletPlugin
metadata:
  name: no-privileged
spec:
  image: $ref
  config:
    denyPrivileged: "true"
    denyHostNamespaces: "false"
  permissions:
    memoryPages: 512
    timeout: 250ms
  nodeSelector:
    matchLabels:
      bench.wasmlet.dev/fleet: wasmlet
  rollout:
    spread: $spread
YAML

log "fleets: ${FLEETS:-wasmlet,kubemark}, ${NODES:-100} nodes each, ${PODS_PER_NODE:-5} pods per node"
"$base/benchfleet" -cluster "$base/cp" -hack "$repo/hack" -base "$base" -wasmlet "$repo/bin/wasmlet" \
  -kubemark "$kubemark" -kubectl "$kubectl" -pod-module "$base/idle.wasm" \
  -fleets "${FLEETS:-wasmlet,kubemark}" -nodes "${NODES:-100}" -pods-per-node "${PODS_PER_NODE:-5}" \
  -rounds "${ROUNDS:-1}" -idle "${IDLE:-120s}" -start-rate "${START_RATE:-5}" -create-rate "${CREATE_RATE:-20}" \
  -port-base "${PORT_BASE:-31000}" -wasmlet-args "${WASMLET_ARGS:-}" \
  -plugin "$base/wasmletplugin.yaml" -rollout-spread "$spread" -plugin-name no-privileged -plugin-digest "$digest" \
  -registry-config "$REGISTRY_CONFIG" -registry-ca "$REGISTRY_CA" -registry-log "$base/registry/registry.log" \
  -out "$repo/build/bench-fleet"
