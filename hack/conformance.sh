#!/usr/bin/env bash
# make conformance / make node-conformance: Kubernetes' own node specs
# (k8s.io/kubernetes v1.36.3) against a single-node cluster whose node is
# wasmlet, the real kubelet, or each in turn.
#
#   SUITE=e2e|e2e_node         e2e (make conformance, the default): test/e2e's
#                              specs of test/e2e/common, by TAGS;
#                              e2e_node (make node-conformance): test/e2e_node's
#                              [NodeConformance] specs, the node conformance test
#   TAGS=both|node|conformance SUITE=e2e only: [NodeConformance] and [Conformance]
#                              (both, the default), or one of them
#   NODE=wasmlet|kubelet|both  the node under test (default wasmlet)
#   FOCUS=RE                   ginkgo focus (default: by SUITE and TAGS)
#   FILES=RE                   keep only the specs whose source file matches (default:
#                              /test/e2e/common/ for e2e, every file for e2e_node;
#                              e.g. FILES=/test/e2e_node/ for the node suite's own specs)
#   SKIP=RE                    added to the skip list (hack/conformance/skip.txt,
#                              and skip-node.txt for SUITE=e2e_node)
#   PARALLEL=N                 specs at once, one suite process each (default 3)
#   SPEC_TIMEOUT=D             limit per spec process (default 30m: the [Slow] back-off
#                              specs take over 10 min on the kubelet)
#   KUBELET_PORT=N             the node's kubelet API port (default 10250), and
#   READ_ONLY_PORT=N           wasmlet's read-only port (default 10255); with
#                              cluster.sh's APISERVER_PORT, ETCD_PORT, ETCD_PEER_PORT,
#                              KCM_PORT and SCHEDULER_PORT, two runs can share a machine
#
# Everything is built from the Go module proxy and cached by version
# (hack/kube/build.sh), the images are built offline (no registry is
# needed), and each node gets a fresh cluster: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler (hack/apiserver/cluster.sh) and a
# private containerd with a CNI bridge (hack/containerd/up.sh). Both suites
# run against a node the harness started and joined (e2e_node.test with
# --start-services=false), so wasmlet and the kubelet are started alike.
# Results go to build/<conformance|node-conformance>/<node>/{summary.json,
# junit.xml,table.txt,specs/}; with NODE=both, compare.txt beside them puts
# the two side by side. durations.json there keeps each spec's longest run
# time seen, so later runs start the longest specs first.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=$repo/build/e2e
SUITE=${SUITE:-e2e}
# The focus and file filter default by SUITE and TAGS (hack/conformance's
# -suite, -tags), and the results are titled by them.
case $SUITE in
e2e)
	results=$repo/build/conformance
	TAGS=${TAGS:-both}
	case $TAGS in
	both | node | conformance) ;;
	*) echo "conformance: TAGS must be both, node or conformance" >&2; exit 2 ;;
	esac
	;;
e2e_node)
	results=$repo/build/node-conformance
	TAGS=
	;;
*) echo "conformance: SUITE must be e2e or e2e_node" >&2; exit 2 ;;
esac
log() { printf '%s: %s %s\n' "${SUITE/e2e_node/node-conformance}" "$(date +%T)" "$*" >&2; }
NODE=${NODE:-wasmlet}
FOCUS=${FOCUS:-}
FILES=${FILES:-}
PARALLEL=${PARALLEL:-3}
# The node's kubelet API port; the control plane's ports are cluster.sh's
# (APISERVER_PORT, ETCD_PORT, …), so two runs can share the machine.
kubelet_port=${KUBELET_PORT:-10250}
read_only_port=${READ_ONLY_PORT:-10255} # wasmlet's /healthz, /pods, /metrics
SPEC_TIMEOUT=${SPEC_TIMEOUT:-30m}
case $NODE in wasmlet | kubelet) nodes=$NODE ;; both) nodes="wasmlet kubelet" ;; *)
	log "NODE must be wasmlet, kubelet or both"; exit 2 ;;
esac
E2E_BASE_PREFIX=wlc
# shellcheck source=lib/e2e.sh
. hack/lib/e2e.sh

e2e_cleanup_more() {
	local d
	[ -f "$base/registry/env" ] && hack/registry/down.sh "$base/registry"
	for d in "$base"/*/; do
		[ -f "$d/node.pid" ] && { kill -TERM "$(cat "$d/node.pid")" 2>/dev/null; sleep 2; kill -KILL "$(cat "$d/node.pid")" 2>/dev/null; }
		[ -f "$d/ctrd/env" ] && hack/containerd/down.sh "$d/ctrd" "$out/bin/cri"
		[ -d "$d/cp" ] && hack/apiserver/cluster.sh down "$d/cp"
	done
	true
}

# The skip list: every line is `REGEX  # the environment reason`; the
# default excludes are ginkgo labels this single, disposable node cannot
# honour ([Serial] and [Disruptive] need the whole node, [Flaky] is upstream's).
skip='\[Serial\]|\[Disruptive\]|\[Flaky\]'
skipfiles=(hack/conformance/skip.txt)
[ "$SUITE" = e2e_node ] && skipfiles+=(hack/conformance/skip-node.txt)
while IFS= read -r line; do
	re=${line%%#*}; re=$(echo "$re" | sed 's/[[:space:]]*$//')
	[ -n "$re" ] && skip="$skip|$re"
done < <(cat "${skipfiles[@]}")
[ -n "${SKIP:-}" ] && skip="$skip|$SKIP"

t0=$(date +%s)
step() { log "$1 ($(( $(date +%s) - t0 )) s since start)"; }
e2e_tools
go build -o "$out/bin/conformance" ./hack/conformance
go build -o "$out/bin/pushimage" ./hack/pushimage
# The suites' source, where the runner finds which containers are Ordered.
gomodcache=$(go env GOMODCACHE)
suite_bin=e2e.test
[ "$SUITE" = e2e_node ] && suite_bin=e2e_node.test
kube=(kube-apiserver kube-controller-manager kube-scheduler kubectl "$suite_bin" agnhost nnp)
[[ " $nodes " == *" kubelet "* ]] && kube+=(kubelet)
for b in "${kube[@]}"; do
	s=$(date +%s)
	p=$(hack/kube/build.sh "$b")
	declare "bin_${b//[.-]/_}=$p"
	log "$b: $p ($(( $(date +%s) - s )) s)"
done
step "binaries ready"

# with_libs ROOT FILE...: copies each of the host's FILEs into ROOT at its
# own path, with the shared libraries it links.
with_libs() {
	local r=$1 f lib
	shift
	for f in "$@"; do
		mkdir -p "$r$(dirname "$f")" && cp -L "$f" "$r$f"
		for lib in $(ldd "$f" | grep -o '/[^ ]*'); do
			mkdir -p "$r$(dirname "$lib")" && cp -L "$lib" "$r$lib"
		done
	done
	chmod -R u+w "$r"
}

# debian_pkg NAME: the path of Debian's package NAME, downloaded once into
# $out/cache.
debian_pkg() {
	local deb
	deb=$(ls "$out"/cache/"$1"_*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		(cd "$out/cache" && apt-get download "$1" >/dev/null 2>&1)
		deb=$(ls "$out"/cache/"$1"_*.deb | head -n1)
	fi
	echo "$deb"
}

# conformance_images: the images the selected specs run, under the names of
# test/utils/image/manifest.go, built offline into $out/images.
conformance_images() {
	local r=$out/rootfs/conf deb a lib
	rm -rf "$r" && mkdir -p "$r"
	deb=$(ls "$out"/cache/busybox-static_*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		(cd "$out/cache" && apt-get download busybox-static 2>/dev/null)
		deb=$(ls "$out"/cache/busybox-static_*.deb | head -n1)
	fi
	# busybox: Debian's busybox-static with its applet links.
	dpkg-deb -x "$deb" "$r/deb"
	mkdir -p "$r/busybox/bin" "$r/busybox/etc" "$r/busybox/tmp"
	cp "$r/deb/bin/busybox" "$r/busybox/bin/busybox"
	for a in $("$r/busybox/bin/busybox" --list); do
		[ "$a" = busybox ] || ln -s busybox "$r/busybox/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/busybox/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' >"$r/busybox/etc/group"
	chmod 1777 "$r/busybox/tmp"
	# nmeter, which the upstream busybox has and Debian's lacks: the node
	# suite's container lifecycle specs time their log lines with it.
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$r/busybox/bin/nmeter" ./hack/nmeter
	e2e_image conf-busybox registry.k8s.io/e2e-test-images/busybox:1.37.0-1 "$r/busybox" /bin/sh
	# nonroot: busybox run as uid 1234.
	cp -a "$r/busybox" "$r/nonroot"
	"$out/bin/mkimage" -o "$out/images/conf-nonroot.tar" -ref registry.k8s.io/e2e-test-images/nonroot:1.5 \
		-cmd /bin/sh -user 1234 "$r/nonroot"
	# nonewprivs: busybox with the setuid nnp.
	cp -a "$r/busybox" "$r/nonewprivs"
	mkdir -p "$r/nonewprivs/usr/local/bin"
	cp "$bin_nnp" "$r/nonewprivs/usr/local/bin/nnp" && chmod 4755 "$r/nonewprivs/usr/local/bin/nnp"
	"$out/bin/mkimage" -o "$out/images/conf-nonewprivs.tar" -ref registry.k8s.io/e2e-test-images/nonewprivs:1.4 \
		-cmd nnp "$r/nonewprivs"
	# agnhost: the static agnhost on busybox, the users and groups of its
	# Dockerfile, porter's certificate beside it, /uploads, and a real curl
	# and bash (the host's, with the libraries they link): the networking
	# specs exec curl, and the probe specs run their scripts with /bin/bash,
	# which the upstream image installs.
	cp -a "$r/busybox" "$r/agnhost"
	cp "$bin_agnhost" "$r/agnhost/agnhost" && ln -s agnhost "$r/agnhost/agnhost-2"
	mkdir -p "$r/agnhost/uploads"
	src=$(go env GOMODCACHE)/k8s.io/kubernetes@v1.36.3/test/images/agnhost/porter
	cp "$src/localhost.crt" "$src/localhost.key" "$r/agnhost/"
	printf 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n' >>"$r/agnhost/etc/passwd"
	printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$r/agnhost/etc/group"
	with_libs "$r/agnhost" "$(command -v curl)" /bin/bash
	"$out/bin/mkimage" -o "$out/images/conf-agnhost.tar" -ref registry.k8s.io/e2e-test-images/agnhost:2.63.0 \
		-entrypoint /agnhost -cmd pause "$r/agnhost"
	# agnhost:2.55 (AgnhostPrev): the same programs as an image of its own
	# (a file naming its tag), so the two names are two image IDs and a
	# container's status names the image it was started from, as with the
	# upstream images; one image under both names made the runtime report
	# the other name.
	cp -a "$r/agnhost" "$r/agnhost-prev"
	printf '2.55\n' >"$r/agnhost-prev/agnhost-version"
	"$out/bin/mkimage" -o "$out/images/conf-agnhost-prev.tar" -ref registry.k8s.io/e2e-test-images/agnhost:2.55 \
		-entrypoint /agnhost -cmd pause "$r/agnhost-prev"
	# glibc-dns-testing: busybox with Debian's glibc hostname (and the
	# libraries it links), whose -f resolves the FQDN through /etc/hosts as
	# the upstream image's does.
	cp -a "$r/busybox" "$r/glibc-dns"
	rm -f "$r/glibc-dns/bin/hostname"
	with_libs "$r/glibc-dns" /bin/hostname
	printf 'hosts: files dns\n' >"$r/glibc-dns/etc/nsswitch.conf"
	"$out/bin/mkimage" -o "$out/images/conf-glibc-dns.tar" -ref registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0 \
		-entrypoint /bin/sh "$r/glibc-dns"
	# nginx: Debian's nginx on busybox, serving /usr/share/nginx/html on
	# port 80 in the foreground, its logs on the container's stdout and
	# stderr, as the upstream image does.
	cp -a "$r/busybox" "$r/nginx"
	for deb in nginx nginx-common; do dpkg-deb -x "$(debian_pkg "$deb")" "$r/nginx-deb"; done
	with_libs "$r/nginx" "$r/nginx-deb/usr/sbin/nginx"
	mkdir -p "$r/nginx/usr/sbin" "$r/nginx/var/log/nginx" "$r/nginx/var/lib/nginx" "$r/nginx/run" "$r/nginx/etc/nginx/conf.d"
	cp "$r/nginx-deb/usr/sbin/nginx" "$r/nginx/usr/sbin/nginx"
	cp "$r/nginx-deb/etc/nginx/mime.types" "$r/nginx/etc/nginx/"
	cp -a "$r/nginx-deb/usr/share/nginx" "$r/nginx/usr/share/"
	ln -sf /dev/stdout "$r/nginx/var/log/nginx/access.log"
	ln -sf /dev/stderr "$r/nginx/var/log/nginx/error.log"
	printf 'www-data:x:33:33:www-data:/var/www:/bin/false\n' >>"$r/nginx/etc/passwd"
	printf 'www-data:x:33:\n' >>"$r/nginx/etc/group"
	cat >"$r/nginx/etc/nginx/nginx.conf" <<'NGINX'
user www-data;
daemon off;
worker_processes 1;
pid /run/nginx.pid;
events { worker_connections 256; }
http {
	include /etc/nginx/mime.types;
	access_log /var/log/nginx/access.log;
	error_log /var/log/nginx/error.log;
	server {
		listen 80 default_server;
		root /usr/share/nginx/html;
		index index.html;
	}
}
NGINX
	"$out/bin/mkimage" -o "$out/images/conf-nginx.tar" -ref registry.k8s.io/e2e-test-images/nginx:1.15-4 \
		-entrypoint /usr/sbin/nginx "$r/nginx"
	# perl: the host's perl with its base library, on busybox.
	cp -a "$r/busybox" "$r/perl"
	with_libs "$r/perl" "$(command -v perl)"
	mkdir -p "$r/perl/usr/lib/x86_64-linux-gnu" && cp -a /usr/lib/x86_64-linux-gnu/perl-base "$r/perl/usr/lib/x86_64-linux-gnu/"
	"$out/bin/mkimage" -o "$out/images/conf-perl.tar" -ref registry.k8s.io/e2e-test-images/perl:5.26 \
		-cmd /bin/sh "$r/perl"
	# ipc-utils: util-linux's ipcmk, ipcs and ipcrm (the host's), on busybox.
	cp -a "$r/busybox" "$r/ipc"
	rm -f "$r/ipc/bin/ipcs" "$r/ipc/bin/ipcrm" "$r/ipc/usr/bin/ipcs" "$r/ipc/usr/bin/ipcrm"
	with_libs "$r/ipc" /usr/bin/ipcmk /usr/bin/ipcs /usr/bin/ipcrm
	"$out/bin/mkimage" -o "$out/images/conf-ipc-utils.tar" -ref registry.k8s.io/e2e-test-images/ipc-utils:1.4 \
		-cmd /bin/sh "$r/ipc"
	# pause: the project's own, under the sandbox image name.
	mkdir -p "$r/pause"
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$r/pause/pause" ./hack/pause
	"$out/bin/mkimage" -o "$out/images/conf-pause.tar" -ref registry.k8s.io/pause:3.10.2 -entrypoint /pause "$r/pause"
}
conformance_images
step "images built"

# The registry for the specs that pull (imagePullPolicy: Always, or an
# image not present): a private registry (hack/registry/up.sh: TLS,
# htpasswd) holding every image built above under its repository path,
# which each node's containerd uses as a mirror of registry.k8s.io
# (hack/containerd/up.sh's REGISTRY_MIRRORS). The images are imported as
# well, so the specs that do not pull never reach it.
images=(busybox nonroot nonewprivs agnhost agnhost-prev glibc-dns nginx perl ipc-utils pause)
hack/registry/up.sh "$base/registry" >/dev/null
registry_env=$base/registry/env
tarballs=()
for i in "${images[@]}"; do tarballs+=("$out/images/conf-$i.tar"); done
(
	. "$registry_env"
	DOCKER_CONFIG=$(dirname "$REGISTRY_CONFIG") "$out/bin/pushimage" -registry "$REGISTRY" -ca "$REGISTRY_CA" "${tarballs[@]}"
) | sed 's/^/  /' >&2
step "images pushed to the registry ($(. "$registry_env" && echo "$REGISTRY"))"

nodeip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -n1)
[ -n "$nodeip" ] || { log "no global IPv4 address for the node"; exit 1; }
nodename=conformance-node

# unmount_under DIR: unmounts DIR and everything mounted below it (the
# kubelet bind-mounts its root dir on itself; pods' volumes are tmpfs),
# again while any is left: a mount stacked on another, or hidden under a
# bind of its parent, shows only once the one above it is gone.
unmount_under() {
	local i
	for i in 1 2 3 4 5; do
		awk -v r="$1" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r >"$base/mounts" || true
		[ -s "$base/mounts" ] || return 0
		xargs -r -n1 umount -l <"$base/mounts" 2>/dev/null || true
	done
}

# run_node NODE: a fresh cluster and containerd, NODE joined to it, the
# specs, and everything stopped again.
run_node() {
	local node=$1 d=$base/$1 ep admin kc i token apiserver root logs ro
	mkdir -p "$d" "$d/manifests"
	root=$d/root logs=$d/logs
	if [ "$SUITE" = e2e_node ]; then
		# The node suite reads a node's files where a kubelet keeps them
		# (/var/lib/kubelet/pod-resources, /var/log/pods, …), so both nodes
		# get the standard layout, emptied before and after. A layout the
		# harness did not make (a real kubelet's) is left alone.
		root=/var/lib/kubelet logs=/var/log/pods
		for x in "$root" "$logs"; do
			if [ -e "$x" ] && [ ! -e "$x/.wasmlet-conformance" ]; then
				log "$x exists and is not the harness's: refusing to use it (a real node's state?)"
				return 1
			fi
			unmount_under "$x"
			rm -rf "$x" && mkdir -p "$x" && touch "$x/.wasmlet-conformance"
		done
	fi
	# The node suite's client speaks to the API server with a bearer token
	# (it has no --kubeconfig): one in system:masters, for this cluster only.
	token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s,e2e-admin,e2e-admin,"system:masters"\n' "$token" >"$d/tokens.csv"
	APISERVER_FLAGS="${APISERVER_FLAGS:-} --token-auth-file=$d/tokens.csv" hack/apiserver/cluster.sh up "$d/cp"
	apiserver=$(sed -n 's/^APISERVER=//p' "$d/cp/env")
	hack/apiserver/cluster.sh controllers "$d/cp"
	admin=$d/cp/admin.kubeconfig
	kc=$(hack/apiserver/cluster.sh node "$d/cp" "$nodename")
	ep=$(REGISTRY_ENV=$registry_env REGISTRY_MIRRORS=registry.k8s.io hack/containerd/up.sh "$d/ctrd" registry.k8s.io/pause:3.10.2)
	for i in "${images[@]}"; do
		ctr --address "$d/ctrd/c.sock" -n k8s.io images import "$out/images/conf-$i.tar" >/dev/null
	done
	"$out/bin/cri" -e "$ep" -timeout 30s wait
	step "$node: cluster and containerd up"
	case $node in
	wasmlet)
		# The hard eviction thresholds the kubelet gets here
		# (hack/kubeletconfig/kubelet.yaml): a full test disk is no DiskPressure.
		"$repo/bin/wasmlet" run --node-name "$nodename" --kubeconfig "$kc" --container-runtime-endpoint "$ep" \
			--root-dir "$root" --pod-logs-dir "$logs" --read-only-port "$read_only_port" \
			--port "$kubelet_port" --client-ca-file "$d/cp/pki/ca.crt" --cluster-domain cluster.local \
			--pod-manifest-path "$d/manifests" \
			--eviction-hard 'memory.available<1Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%' >"$d/node.log" 2>&1 &
		;;
	kubelet)
		# As wasmlet: the node suite reads /stats/summary and
		# /metrics/cadvisor from the read-only port on localhost, which the
		# other suite's node leaves closed; both ports listen on every
		# address, wasmlet's and the kubelet's default.
		ro=0
		[ "$SUITE" = e2e_node ] && ro=$read_only_port
		kubelet_config containerRuntimeEndpoint="$ep" anonymousEnabled=false webhookEnabled=true \
			clientCAFile="$d/cp/pki/ca.crt" authorizationMode=Webhook address=0.0.0.0 port="$kubelet_port" \
			readOnlyPort="$ro" podLogsDir="$logs" clusterDomain=cluster.local staticPodPath="$d/manifests" >"$d/kubelet.yaml"
		"$bin_kubelet" --config "$d/kubelet.yaml" --kubeconfig "$kc" --hostname-override "$nodename" \
			--node-ip "$nodeip" --root-dir "$root" --cert-dir "$root/pki" >"$d/node.log" 2>&1 &
		;;
	esac
	echo $! >"$d/node.pid"
	if ! "$bin_kubectl" --kubeconfig "$admin" wait --for=condition=Ready "node/$nodename" --timeout=180s >/dev/null 2>&1; then
		# The node object may not exist yet when the wait starts: once more.
		sleep 5
		"$bin_kubectl" --kubeconfig "$admin" wait --for=condition=Ready "node/$nodename" --timeout=120s >/dev/null ||
			{ log "$node: node not Ready; its log:"; tail -n 30 "$d/node.log" >&2; return 1; }
	fi
	step "$node: node Ready, running the specs"
	rm -rf "${results:?}/$node"
	case $SUITE in
	e2e)
		"$out/bin/conformance" run -e2e "$bin_e2e_test" -out "$results/$node" -node "$node" -suite "$SUITE" -tags "$TAGS" \
			-focus "$FOCUS" -skip "$skip" -files "$FILES" -source "$gomodcache" -parallel "$PARALLEL" -timeout "$SPEC_TIMEOUT" -durations "$results/durations.json" -- \
			--kubeconfig "$admin" --provider skeleton --kubectl-path "$bin_kubectl" --minStartupPods=-1 \
			--allowed-not-ready-nodes 0 || status=1
		;;
	e2e_node)
		# The suite's own services stay off: the node is the one started
		# above, as for the other suite, and its images are imported.
		"$out/bin/conformance" run -e2e "$bin_e2e_node_test" -out "$results/$node" -node "$node" -suite "$SUITE" -tags "$TAGS" \
			-focus "$FOCUS" -skip "$skip" -files "$FILES" -source "$gomodcache" -output-dir-flag '' -parallel "$PARALLEL" -timeout "$SPEC_TIMEOUT" -durations "$results/durations.json" -- \
			--start-services=false --stop-services=false --prepull-images=false --node-name "$nodename" \
			--host "$apiserver" --bearer-token "$token" --container-runtime-endpoint "$ep" \
			--dns-domain cluster.local || status=1
		;;
	esac
	cp "$d/node.log" "$results/$node/node.log" 2>/dev/null || true
	step "$node: specs done"
	kill -TERM "$(cat "$d/node.pid")" 2>/dev/null || true
	wait "$(cat "$d/node.pid")" 2>/dev/null || true
	rm -f "$d/node.pid"
	hack/containerd/down.sh "$d/ctrd" "$out/bin/cri"
	hack/apiserver/cluster.sh down "$d/cp"
	if [ "$SUITE" = e2e_node ]; then
		unmount_under "$root"
		rm -rf "$root" "$logs"
	elif [ "$node" = kubelet ] && [ -z "$kubelet_dir_before" ]; then
		# The kubelet keeps its device-plugin socket under
		# /var/lib/kubelet/device-plugins whatever its --root-dir: what it
		# made there goes, so the node suite does not take it for a real
		# node's state.
		rm -f /var/lib/kubelet/device-plugins/kubelet.sock
		rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
	fi
}

# Whether /var/lib/kubelet existed before the run (empty: it did not).
kubelet_dir_before=$([ -e /var/lib/kubelet ] && echo yes || true)

for n in $nodes; do
	run_node "$n"
	cat "$results/$n/table.txt"
done
if [ "$NODE" = both ]; then
	"$out/bin/conformance" compare "$results/wasmlet/summary.json" "$results/kubelet/summary.json" | tee "$results/compare.txt"
fi
step "done"
