#!/usr/bin/env bash
# make bench-eviction: node-pressure eviction and image GC under wasmlet and
# under the real kubelet (k8s.io/kubernetes v1.36.3, cached by
# hack/kube/build.sh), each in turn on one private containerd, joined to a
# throwaway control plane (hack/apiserver/cluster.sh: etcd and a real
# kube-apiserver) so that the pods come from the API server: both agents
# refuse to evict a static pod. hack/benchnode runs the agents and prints:
#
#   eviction  ROUNDS times per agent: a hard threshold memory.available<X,
#             X set at the agent's start MARGIN under memory.available then,
#             a 10 s pressure transition period; a BestEffort testbox pod
#             allocates twice MARGIN. The time from memory.available (read
#             as both agents read it, every 5 ms) crossing X to the pod seen
#             terminal with the node's DisruptionTarget condition by a watch
#             (the kubelet leaves testbox, which exits 0 on SIGTERM,
#             Succeeded; wasmlet Failed/Evicted) and its container seen stopped
#             through CRI; the table has each round and each agent's median,
#             with the load average.
#   gc-load   LOAD_ROUNDS times per agent: LOAD_PODS busybox `sleep` pods
#             running, eviction on its normal period with the usual hard
#             thresholds, image GC with a high threshold of 1 % and a
#             minimum age of 1 min, an unused image (testbox) imported
#             before the agent starts (pause and busybox again too,
#             should the run before have collected one); over a WINDOW centred on the second
#             image GC pass (5 min after the start: the kubelet's fixed
#             period, wasmlet's default), the agent's CPU seconds and its
#             RSS (average and peak, sampled each second), whether the
#             unused image went in the window, and the wasmlet/kubelet
#             ratios.
#
# Environment: MODE (default eviction,gc-load), ROUNDS (3), MARGIN (768Mi),
# LOAD_PODS (30), LOAD_ROUNDS (1), WINDOW (60s), AGENTS (kubelet,wasmlet;
# the order is reversed in even rounds), WASMLET (default bin/wasmlet),
# KEEP_BASE=1 keeps the agents' logs. The control plane's ports
# (APISERVER_PORT 28443, ETCD_PORT 25790, ETCD_PEER_PORT 25800, KCM_PORT
# 28257, SCHEDULER_PORT 28259) differ from the other scripts' defaults.
# Not part of make test: about 6 min for the eviction rounds and 12 min for
# one gc-load round of both agents.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=$repo/build/e2e
log() { printf 'eviction-figures: %s %s\n' "$(date +%T)" "$*" >&2; }
E2E_BASE_PREFIX=wlv
export APISERVER_PORT=${APISERVER_PORT:-28443} ETCD_PORT=${ETCD_PORT:-25790} ETCD_PEER_PORT=${ETCD_PEER_PORT:-25800} \
  KCM_PORT=${KCM_PORT:-28257} SCHEDULER_PORT=${SCHEDULER_PORT:-28259}
# shellcheck source=lib/e2e.sh
. hack/lib/e2e.sh
e2e_cleanup_more() {
  [ -f "$base/cluster/env" ] && hack/apiserver/cluster.sh down "$base/cluster"
  return 0
}

e2e_tools
go build -o "$out/bin/benchnode" ./hack/benchnode
kubelet=$(hack/kube/build.sh kubelet)
kas=$(hack/kube/build.sh kube-apiserver)
e2e_images busybox
log "control plane"
KUBE_APISERVER=$kas hack/apiserver/cluster.sh up "$base/cluster"
hack/apiserver/cluster.sh node "$base/cluster" bench-node >/dev/null
e2e_runtime_up containerd pause busybox testbox
log "containerd up at $ep; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$out/bin/benchnode" -mode "${MODE:-eviction,gc-load}" -cluster "$base/cluster" -node bench-node \
  -endpoint "$ep" -base "$base" -wasmlet "${WASMLET:-$repo/bin/wasmlet}" -kubelet "$kubelet" \
  -agents "${AGENTS:-kubelet,wasmlet}" -rounds "${ROUNDS:-3}" -margin "${MARGIN:-768Mi}" \
  -load-pods "${LOAD_PODS:-30}" -load-rounds "${LOAD_ROUNDS:-1}" -load-window "${WINDOW:-60s}" \
  -import "$out/images/pause.tar,$out/images/busybox.tar,$out/images/testbox.tar" -victim wasmlet.local/testbox:1.0 \
  -ctr-sock "$base/ctrd/c.sock" || status=1
e2e_runtime_down containerd
exit "$status"
