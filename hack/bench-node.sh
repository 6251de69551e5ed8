#!/usr/bin/env bash
# make bench-node: a burst of static pods on one private containerd, under
# wasmlet and under the real kubelet (k8s.io/kubernetes v1.36.3, built from
# the Go module proxy as the conformance harness builds it) alternately, on
# the same manifests (host-network busybox `sleep`). Prints, for each pod
# count, the first, median and last pod Running, the time until every
# container stopped and until the deleted pods left /pods, the agent's CPU
# and RSS, the runtime's CPU (containerd, its shims, runc) and the share of
# the machine's CPU busy while starting, and the wasmlet/kubelet ratios, with
# the 1-minute load average
# beside each figure. Not part of make test; takes ~10 min with the defaults.
# With PROBES=1 every pod's container serves HTTP (busybox httpd) and has an
# httpGet readiness and an exec liveness probe, period 10 s; the table adds
# the time until all pods are Ready and, over a steady window (WINDOW, 60 s)
# from then, the agent's CPU, the runtime's (containerd and its shims: what
# the exec probes cost) and the agent's RSS.
#
#   PODS=1,10,30,100   pod counts
#   ROUNDS=2           rounds (each runs every count under each agent)
#   AGENTS=kubelet,wasmlet  the agents, in run order (reversed in even rounds)
#   WASMLET=PATH       the wasmlet binary to time (default bin/wasmlet, built)
#   PROBES=1           probes on every pod, and the steady window
#   WINDOW=60s         the steady window (with PROBES=1)
#   LOGS=DIR           keep each run's agent log, and containerd's, in DIR
#   WASMLET_ARGS=...   extra wasmlet run arguments (e.g. --log-level debug)
#   HOOK_PLUGINS=DIR   the plugin directory of the agent wasmlet-hooks (a
#                      wasmlet with sync hooks loaded; AGENTS=wasmlet,wasmlet-hooks
#                      compares it with none); by default the three ported
#                      NRI hooks (device-injector, resource-adjuster,
#                      validator), which act on no benchmark pod but are
#                      called at every one's PreCreate or Validate
#
# The machine's other load shows in the load averages: compare runs at
# similar load only.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=$repo/build/e2e
log() { printf 'bench-node: %s %s\n' "$(date +%T)" "$*" >&2; }
E2E_BASE_PREFIX=wlb
# shellcheck source=lib/e2e.sh
. hack/lib/e2e.sh

e2e_tools
go build -o "$out/bin/benchnode" ./hack/benchnode
kubelet=$(hack/kube/build.sh kubelet)
e2e_images busybox
e2e_runtime_up containerd pause busybox
log "containerd up at $ep"
hooks=${HOOK_PLUGINS:-}
if [ -z "$hooks" ] && [[ ${AGENTS:-} == *wasmlet-hooks* ]]; then
  hooks=$base/hook-plugins
  ./hack/build-plugins.sh "$hooks" plugins/device-injector plugins/resource-adjuster plugins/validator
fi
"$out/bin/benchnode" ${hooks:+-hook-plugins "$hooks"} -endpoint "$ep" -base "$base" -wasmlet "${WASMLET:-$repo/bin/wasmlet}" -kubelet "$kubelet" \
	-pods "${PODS:-1,10,30,100}" -rounds "${ROUNDS:-2}" -agents "${AGENTS:-kubelet,wasmlet}" \
	${PROBES:+-probes=true -window "${WINDOW:-60s}"} ${LOGS:+-logs "$LOGS"} -wasmlet-args "${WASMLET_ARGS:-}" || status=1
[ -z "${LOGS:-}" ] || cp "$base/ctrd/containerd.log" "$LOGS/containerd.log" || true
if [ -n "${status:-}" ] && grep -q -m1 -E '^(fatal error|panic):' "$base/ctrd/containerd.log"; then
  log "containerd itself failed; its log says:"
  grep -m1 -A4 -E '^(fatal error|panic):' "$base/ctrd/containerd.log" >&2
fi
e2e_runtime_down containerd
rmdir "/sys/fs/cgroup/wasmlet-bench-${base##*/}" "/sys/fs/cgroup/cpuacct/wasmlet-bench-${base##*/}" 2>/dev/null || true
exit "${status:-0}"
