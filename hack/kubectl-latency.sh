#!/usr/bin/env bash
# The latency of `kubectl exec -- true` and `kubectl logs --tail 10` against
# a wasmlet node and against the real kubelet v1.36.3, joined in turn to the
# same control plane in one run (each on a private containerd of its own,
# one node at a time so that they never share the machine's cgroups):
# ROUNDS (default 20) of each command, the median, min and max printed.
#
#   hack/kubectl-latency.sh       (a heavy job: run nothing else heavy beside it)
#
# The control plane is hack/apiserver/cluster.sh's (etcd, kube-apiserver,
# kube-controller-manager's ServiceAccount controllers), the binaries
# hack/kube/build.sh's (cached by version), the busybox image hack/lib/e2e.sh's.
# WASMLET_FLAGS are added to `wasmlet run` (--log-level debug logs each
# kubelet API request's duration); KEEP_BASE=1 keeps the nodes' logs.
# Ports: APISERVER_PORT 28443, ETCD_PORT 25790, ETCD_PEER_PORT 25800,
# KCM_PORT 28257, NODE_PORT 28250 (the node's kubelet API).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/e2e
rounds=${ROUNDS:-20}
node_port=${NODE_PORT:-28250}
log() { printf 'kubectl-latency: %s %s\n' "$(date +%T)" "$*" >&2; }
export APISERVER_PORT=${APISERVER_PORT:-28443} ETCD_PORT=${ETCD_PORT:-25790} ETCD_PEER_PORT=${ETCD_PEER_PORT:-25800} \
	KCM_PORT=${KCM_PORT:-28257} SCHEDULER_PORT=${SCHEDULER_PORT:-28259}
E2E_BASE_PREFIX=wlk
# shellcheck source=lib/e2e.sh
. hack/lib/e2e.sh
e2e_cleanup_more() {
	[ -f "$base/node.pid" ] && kill -KILL "$(cat "$base/node.pid")" 2>/dev/null
	for d in "$base"/ctrd-*; do [ -f "$d/env" ] && hack/containerd/down.sh "$d" "$out/bin/cri"; done
	[ -d "$base/cp" ] && hack/apiserver/cluster.sh down "$base/cp"
	true
}

kas=$(hack/kube/build.sh kube-apiserver)
hack/kube/build.sh kube-controller-manager >/dev/null
kubectl_bin=$(hack/kube/build.sh kubectl)
kubelet_bin=$(hack/kube/build.sh kubelet)
e2e_tools
e2e_images busybox
nodeip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -n1)

cp=$base/cp
KUBE_APISERVER=$kas hack/apiserver/cluster.sh up "$cp"
KCM_CONTROLLERS=serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller \
	SCHEDULER=0 hack/apiserver/cluster.sh controllers "$cp"
k() { "$kubectl_bin" --kubeconfig "$cp/admin.kubeconfig" "$@"; }
for _ in $(seq 100); do k get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done

# median_ms CMD...: runs CMD $rounds times (after one warm-up) and prints
# "median min max" in milliseconds.
median_ms() {
	local i t0 t1 times=()
	"$@" >/dev/null
	for i in $(seq "$rounds"); do
		t0=$(date +%s%N)
		"$@" >/dev/null
		t1=$(date +%s%N)
		times+=($(( (t1 - t0) / 1000 )))
	done
	printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {
		m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2
		printf "%.1f %.1f %.1f\n", m/1000, a[1]/1000, a[NR]/1000 }'
}

results=()
for node in wasmlet kubelet; do
	name=lat-$node d=$base/$node
	mkdir -p "$d"
	kc=$(hack/apiserver/cluster.sh node "$cp" "$name")
	ep=$(hack/containerd/up.sh "$base/ctrd-$node" wasmlet.local/pause:1.0)
	for i in pause busybox; do
		ctr --address "$base/ctrd-$node/c.sock" -n k8s.io images import "$out/images/$i.tar" >/dev/null
	done
	"$out/bin/cri" -e "$ep" -timeout 30s wait
	case $node in
	wasmlet)
		"$repo/bin/wasmlet" run --node-name "$name" --kubeconfig "$kc" --container-runtime-endpoint "$ep" \
			--root-dir "$d/root" --pod-logs-dir "$d/logs" --read-only-port 0 \
			--port "$node_port" --client-ca-file "$cp/pki/ca.crt" ${WASMLET_FLAGS:-} >"$d/node.log" 2>&1 &
		;;
	kubelet)
		{ e2e_kubelet_config "$ep" "$cp/pki/ca.crt" "$nodeip" "$node_port" "$d/logs"; echo "healthzPort: 0"; } >"$d/kubelet.yaml"
		"$kubelet_bin" --config "$d/kubelet.yaml" --kubeconfig "$kc" --hostname-override "$name" \
			--node-ip "$nodeip" --root-dir "$d/root" --cert-dir "$d/root/pki" >"$d/node.log" 2>&1 &
		;;
	esac
	echo $! >"$base/node.pid"
	for _ in $(seq 300); do k get node "$name" >/dev/null 2>&1 && break; sleep 0.2; done
	k wait --for=condition=Ready "node/$name" --timeout=180s >/dev/null ||
		{ log "$node: node not Ready; its log:"; tail -n 30 "$d/node.log" >&2; exit 1; }
	# A pod with a finished log of 1000 lines and a shell to exec into.
	k apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: lat, namespace: default}
spec:
  nodeName: $name
  tolerations: [{operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: wasmlet.local/busybox:1.0
    imagePullPolicy: Never
    command: [sh, -c, 'i=0; while [ \$i -lt 1000 ]; do i=\$((i+1)); echo line \$i; done; exec sleep 100000']
POD
	k wait --for=condition=Ready pod/lat --timeout=120s >/dev/null ||
		{ log "$node: pod not Ready"; k get pod lat -o wide >&2; tail -n 30 "$d/node.log" >&2; exit 1; }
	[ "$(k logs lat --tail 1)" = "line 1000" ] || { log "$node: the pod's log does not end at line 1000"; exit 1; }
	log "$node: $rounds rounds each"
	results+=("$node exec $(median_ms k exec lat -- true)")
	results+=("$node logs $(median_ms k logs lat --tail 10)")
	k delete pod lat --grace-period=0 --force >/dev/null 2>&1 || true
	kill -TERM "$(cat "$base/node.pid")" 2>/dev/null || true
	wait "$(cat "$base/node.pid")" 2>/dev/null || true
	rm -f "$base/node.pid"
	k delete node "$name" >/dev/null
	hack/containerd/down.sh "$base/ctrd-$node" "$out/bin/cri"
done

printf '\n%-34s %10s %10s %10s   (ms, %d rounds, kubectl %s)\n' command median min max "$rounds" "$("$kubectl_bin" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -n1)"
for r in "${results[@]}"; do
	set -- $r
	case $2 in exec) what='kubectl exec -- true' ;; logs) what='kubectl logs --tail 10' ;; esac
	printf '%-34s %10s %10s %10s\n' "$what ($1)" "$3" "$4" "$5"
done
