#!/usr/bin/env bash
# The CRI configs both agents send for the same pods, compared field by
# field (`make cri-diff`; not part of `make test`: it needs the kubelet
# v1.36.3, built and cached by hack/kube/build.sh):
#   1. a private containerd (hack/containerd/up.sh) with the busybox image,
#      behind `cridiff proxy`, which forwards every CRI call and records the
#      RunPodSandbox and CreateContainer requests;
#   2. the kubelet, standalone, on the static pods of hack/cridiff/pods,
#      until every container was created; the pods are then removed;
#   3. wasmlet the same way, on the same pods;
#   4. `cridiff diff` of the two recordings, each agent's own directories
#      replaced by placeholders, the documented differences
#      (hack/cridiff/known.txt, with their reasons) marked; exit 1 on any
#      other difference. Recordings and the report go to build/cri-diff.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/e2e
res=$repo/build/cri-diff
log() { printf 'cri-diff: %s %s\n' "$(date +%T)" "$*" >&2; }
E2E_BASE_PREFIX=wcd
. hack/lib/e2e.sh
agent_pid=
proxy_pid=
e2e_cleanup_more() {
  [ -z "$agent_pid" ] || kill -KILL "$agent_pid" 2>/dev/null
  [ -z "$proxy_pid" ] || kill -KILL "$proxy_pid" 2>/dev/null
}

e2e_tools
go build -o "$out/bin/cridiff" ./hack/cridiff
kubelet=$(hack/kube/build.sh kubelet)
e2e_images busybox
e2e_runtime_up containerd pause busybox
rm -rf "$res" && mkdir -p "$res"
pods=$repo/hack/cridiff/pods
want=$(cat "$pods"/*.yaml | grep -c -- '- name:' || true) # containers, + sandboxes below
want=$(( want + $(ls "$pods"/*.yaml | wc -l) ))

# record NAME COMMAND...: runs an agent on the proxy until it has asked for
# every sandbox and container, then stops it and removes the pods.
record() {
  local name=$1
  shift
  "$out/bin/cridiff" proxy -listen "unix://$base/proxy.sock" -to "$ep" -out "$res/$name.jsonl" >"$base/proxy-$name.log" 2>&1 &
  proxy_pid=$!
  "$out/bin/cri" -e "unix://$base/proxy.sock" -timeout 30s wait
  "$@" >"$res/$name.log" 2>&1 &
  agent_pid=$!
  local n=0
  for _ in $(seq 300); do
    n=$(wc -l <"$res/$name.jsonl" 2>/dev/null || echo 0)
    [ "$n" -ge "$want" ] && break
    kill -0 "$agent_pid" 2>/dev/null || { log "$name exited; its log:"; tail -n 30 "$res/$name.log" >&2; return 1; }
    sleep 1
  done
  [ "$n" -ge "$want" ] || { log "$name made $n of $want sandboxes and containers in 300 s; its log:"; tail -n 30 "$res/$name.log" >&2; return 1; }
  log "$name: $n requests recorded"
  kill -TERM "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
  kill -TERM "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true; proxy_pid=
  "$out/bin/cri" -e "$ep" -timeout 120s rmall
}

mkdir -p "$base/kubelet/manifests" "$base/wasmlet/manifests"
cp "$pods"/*.yaml "$base/kubelet/manifests/"
cp "$pods"/*.yaml "$base/wasmlet/manifests/"
kubelet_config containerRuntimeEndpoint="unix://$base/proxy.sock" staticPodPath="$base/kubelet/manifests" \
  anonymousEnabled=true webhookEnabled=false authorizationMode=AlwaysAllow readOnlyPort=0 port=0 healthzPort=0 \
  clusterDomain=cluster.local clusterDNS=10.96.0.10 podLogsDir="$base/kubelet/logs" >"$base/kubelet/kubelet.yaml"
log "recording the kubelet"
record kubelet "$kubelet" --config "$base/kubelet/kubelet.yaml" --hostname-override cridiff \
  --root-dir "$base/kubelet/root" --cert-dir "$base/kubelet/pki"
log "recording wasmlet"
record wasmlet "$repo/bin/wasmlet" run --node-name cridiff --container-runtime-endpoint "unix://$base/proxy.sock" \
  --pod-manifest-path "$base/wasmlet/manifests" --root-dir "$base/wasmlet/root" --pod-logs-dir "$base/wasmlet/logs" \
  --read-only-port 0 --port 0 --cluster-domain cluster.local --cluster-dns 10.96.0.10

log "comparing"
"$out/bin/cridiff" diff -known hack/cridiff/known.txt \
  -a-replace "$base/kubelet/root=<root>,$base/kubelet/logs=<logs>" \
  -b-replace "$base/wasmlet/root=<root>,$base/wasmlet/logs=<logs>" \
  "$res/kubelet.jsonl" "$res/wasmlet.jsonl" | tee "$res/report.txt" || status=1
