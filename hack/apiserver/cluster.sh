#!/usr/bin/env bash
# A throwaway Kubernetes control plane on loopback for the apiserver e2e
# suite: etcd (Debian's etcd-server) and a real kube-apiserver
# (hack/kube/build.sh, cached by version), with NodeRestriction and
# Node,RBAC authorization, an audit log, and client certificates for an admin
# (O=system:masters) and for nodes (O=system:nodes, CN=system:node:<name>).
# etcd is compacted every 15 s (not 5 min), so a client that re-watches
# after an API server restart may meet "410 Gone" and must relist.
#
#   cluster.sh up DIR             PKI, etcd, kube-apiserver, the default ServiceAccount;
#                                 writes DIR/admin.kubeconfig and DIR/env
#   cluster.sh node DIR NAME      DIR/node-NAME.kubeconfig (a node client certificate)
#   cluster.sh controllers DIR    kube-controller-manager and kube-scheduler (the
#                                 namespaces' ServiceAccounts and kube-root-ca.crt, CSR
#                                 signing, node lifecycle; scheduling) for a full cluster;
#                                 KCM_CONTROLLERS (default '*') narrows the controllers,
#                                 SCHEDULER=0 leaves the scheduler out
#   cluster.sh stop-apiserver DIR / start-apiserver DIR   (restart the apiserver only)
#   cluster.sh down DIR           stops everything (SIGTERM, then SIGKILL)
#
# The API server reaches nodes' :10250 (logs, exec, port-forward) with the admin
# client certificate, by their InternalIP, and admits privileged containers (as
# kubeadm's clusters do; the node decides what it runs).
#
# Environment: APISERVER_FLAGS (extra kube-apiserver flags, kept for
# start-apiserver), KCM_FLAGS (extra kube-controller-manager flags), ETCD_PORT (23790), ETCD_PEER_PORT (23800), APISERVER_PORT (26443),
# KCM_PORT (26257), SCHEDULER_PORT (26259), KUBE_APISERVER (a binary; default:
# build or reuse the cached one; the same for the controllers through hack/kube).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'apiserver: %s %s\n' "$(date +%T)" "$*" >&2; }

etcd_port=${ETCD_PORT:-23790}
etcd_peer=${ETCD_PEER_PORT:-23800}
api_port=${APISERVER_PORT:-26443}
kcm_port=${KCM_PORT:-26257}
sched_port=${SCHEDULER_PORT:-26259}

# cert DIR NAME SUBJECT [EXT]: a key and a certificate signed by DIR/ca,
# with a random serial number rather than one from a serial file the CA
# keeps: two `cluster.sh node` runs at once then sign without sharing a file.
cert() {
	local d=$1 n=$2 subj=$3 ext=${4:-} serial
	serial=0x$(openssl rand -hex 16)
	openssl genrsa -out "$d/$n.key" 2048 2>/dev/null
	openssl req -new -key "$d/$n.key" -subj "$subj" -out "$d/$n.csr" 2>/dev/null
	if [[ -n $ext ]]; then
		printf '%s\n' "$ext" >"$d/$n.ext"
		openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -set_serial "$serial" \
			-days 2 -sha256 -extfile "$d/$n.ext" -out "$d/$n.crt" 2>/dev/null
	else
		openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -set_serial "$serial" \
			-days 2 -sha256 -out "$d/$n.crt" 2>/dev/null
	fi
	rm -f "$d/$n.csr" "$d/$n.ext"
}

# kubeconfig DIR FILE USER CERTNAME
kubeconfig() {
	local d=$1 f=$2 user=$3 c=$4
	cat >"$f" <<KC
apiVersion: v1
kind: Config
clusters:
- name: wasmlet-e2e
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $d/pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $d/pki/$c.crt
    client-key: $d/pki/$c.key
contexts:
- name: $user
  context: {cluster: wasmlet-e2e, user: $user}
current-context: $user
KC
}

pki() {
	local d=$1/pki
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" \
		-days 2 -subj "/CN=wasmlet-e2e-ca" 2>/dev/null
	cert "$d" serving "/CN=kube-apiserver" \
		"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:10.96.0.1
extendedKeyUsage=serverAuth"
	cert "$d" admin "/O=system:masters/CN=wasmlet-e2e-admin" "extendedKeyUsage=clientAuth"
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	kubeconfig "$1" "$1/admin.kubeconfig" admin admin
}

wait_http() { # URL TRIES CURL-ARGS...
	local url=$1 tries=$2
	shift 2
	for ((i = 0; i < tries; i++)); do
		if curl -fsS --max-time 2 "$@" "$url" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	return 1
}

admin_curl() {
	local d=$1
	shift
	curl -fsS --max-time 5 --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" "$@"
}

start_etcd() {
	local d=$1
	mkdir -p "$d/etcd"
	etcd --name wasmlet-e2e --data-dir "$d/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
		--initial-cluster "wasmlet-e2e=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync \
		>"$d/etcd.log" 2>&1 &
	echo $! >"$d/etcd.pid"
	wait_http "http://127.0.0.1:$etcd_port/health" 100 || { log "etcd did not start:"; tail -n 20 "$d/etcd.log" >&2; return 1; }
}

start_apiserver() {
	local d=$1 bin
	bin=$(cat "$d/kube-apiserver.path")
	cat >"$d/audit-policy.yaml" <<'AP'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
AP
	"$bin" --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --secure-port "$api_port" \
		--advertise-address 127.0.0.1 --endpoint-reconciler-type none \
		--tls-cert-file "$d/pki/serving.crt" --tls-private-key-file "$d/pki/serving.key" \
		--client-ca-file "$d/pki/ca.crt" \
		--kubelet-client-certificate "$d/pki/admin.crt" --kubelet-client-key "$d/pki/admin.key" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$d/pki/sa.pub" \
		--service-account-signing-key-file "$d/pki/sa.key" --service-cluster-ip-range 10.96.0.0/24 \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --profiling=false \
		--allow-privileged=true \
		--audit-policy-file "$d/audit-policy.yaml" --audit-log-path "$d/audit.log" --audit-log-format json \
		--audit-log-mode blocking \
		--etcd-compaction-interval 15s \
		$(cat "$d/kube-apiserver.flags" 2>/dev/null) \
		>>"$d/kube-apiserver.log" 2>&1 &
	echo $! >"$d/kube-apiserver.pid"
	if ! wait_http "https://127.0.0.1:$api_port/readyz" 300 --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key"; then
		log "kube-apiserver not ready:"
		tail -n 30 "$d/kube-apiserver.log" >&2
		return 1
	fi
}

# start_controllers DIR: kube-controller-manager and kube-scheduler with the
# admin kubeconfig, on loopback, no leader election.
start_controllers() {
	local d=$1 kcm sched
	kcm=$("$here/../kube/build.sh" kube-controller-manager)
	"$kcm" --kubeconfig "$d/admin.kubeconfig" --authentication-kubeconfig "$d/admin.kubeconfig" \
		--authorization-kubeconfig "$d/admin.kubeconfig" --bind-address 127.0.0.1 --secure-port "$kcm_port" \
		--leader-elect=false --use-service-account-credentials=false \
		--service-account-private-key-file "$d/pki/sa.key" --root-ca-file "$d/pki/ca.crt" \
		--cluster-signing-cert-file "$d/pki/ca.crt" --cluster-signing-key-file "$d/pki/ca.key" \
		--controllers "${KCM_CONTROLLERS:-*}" --service-cluster-ip-range 10.96.0.0/24 \
		${KCM_FLAGS:-} \
		>>"$d/kube-controller-manager.log" 2>&1 &
	echo $! >"$d/kube-controller-manager.pid"
	wait_http "https://127.0.0.1:$kcm_port/healthz" 300 -k || { log "kube-controller-manager not healthy:"; tail -n 20 "$d/kube-controller-manager.log" >&2; return 1; }
	[[ ${SCHEDULER:-1} == 0 ]] && return 0
	sched=$("$here/../kube/build.sh" kube-scheduler)
	"$sched" --kubeconfig "$d/admin.kubeconfig" --authentication-kubeconfig "$d/admin.kubeconfig" \
		--authorization-kubeconfig "$d/admin.kubeconfig" --bind-address 127.0.0.1 --secure-port "$sched_port" \
		--leader-elect=false >>"$d/kube-scheduler.log" 2>&1 &
	echo $! >"$d/kube-scheduler.pid"
	wait_http "https://127.0.0.1:$sched_port/healthz" 300 -k || { log "kube-scheduler not healthy:"; tail -n 20 "$d/kube-scheduler.log" >&2; return 1; }
}

stop_pid() { # PIDFILE
	local f=$1 pid
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	if kill -TERM "$pid" 2>/dev/null; then
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

cmd=${1:?usage: cluster.sh up|node|controllers|stop-apiserver|start-apiserver|down DIR [NAME]}
dir=${2:?usage: cluster.sh $cmd DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case $cmd in
up)
	bin=${KUBE_APISERVER:-$("$here/../kube/build.sh" kube-apiserver)}
	echo "$bin" >"$dir/kube-apiserver.path"
	echo "${APISERVER_FLAGS:-}" >"$dir/kube-apiserver.flags"
	pki "$dir"
	start_etcd "$dir"
	start_apiserver "$dir"
	# No controller-manager here: the default ServiceAccount pods need.
	sa='{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":"default"}}'
	for ((i = 0; i < 50; i++)); do
		out=$(admin_curl "$dir" -X POST -H 'Content-Type: application/json' -d "$sa" \
			"https://127.0.0.1:$api_port/api/v1/namespaces/default/serviceaccounts" 2>&1) && break
		grep -q 409 <<<"$out" && break
		sleep 0.2
	done
	cat >"$dir/env" <<ENV
APISERVER=https://127.0.0.1:$api_port
ADMIN_KUBECONFIG=$dir/admin.kubeconfig
AUDIT_LOG=$dir/audit.log
ENV
	log "ready: https://127.0.0.1:$api_port ($dir)"
	;;
node)
	name=${3:?usage: cluster.sh node DIR NAME}
	cert "$dir/pki" "node-$name" "/O=system:nodes/CN=system:node:$name" "extendedKeyUsage=clientAuth"
	kubeconfig "$dir" "$dir/node-$name.kubeconfig" "system:node:$name" "node-$name"
	echo "$dir/node-$name.kubeconfig"
	;;
controllers) start_controllers "$dir" ;;
stop-apiserver) stop_pid "$dir/kube-apiserver.pid" ;;
start-apiserver) start_apiserver "$dir" ;;
down)
	stop_pid "$dir/kube-scheduler.pid"
	stop_pid "$dir/kube-controller-manager.pid"
	stop_pid "$dir/kube-apiserver.pid"
	stop_pid "$dir/etcd.pid"
	;;
*)
	log "unknown command $cmd"
	exit 2
	;;
esac
