#!/usr/bin/env bash
# The end-to-end suite (cmd/wasmlet/e2e) against real runtimes, as `make test`
# and `make e2e` run it; also runnable alone. It
#   1. builds the test images offline (busybox from Debian's busybox-static,
#      a pause image from hack/pause, testbox from examples/workloads/testbox),
#      cached by content under build/e2e;
#   2. starts a private containerd under a short BASE (hack/containerd/up.sh),
#      imports the images into namespace k8s.io and runs the suite through
#      bin/wasmlet against it;
#   3. runs the suite against the embedded WASI runtime (a standalone
#      `wasmlet runtime` with testbox.wasm imported as the same image name);
#   4. tears everything down from a trap (agents, pods via CRI, containerd,
#      mounts, the CNI bridge), so a failing test leaves the machine clean.
#
# Environment: E2E_RUNTIMES (default "containerd embedded"), E2E_RUN (a -run
# pattern), E2E_TIMEOUT (default 30m), E2E_AGENT_FLAGS and E2E_AGENT_ENV (extra
# flags and environment for every `wasmlet run`), KEEP_BASE=1 keeps logs.
# Assumes hack/install-deps.sh ran (the Makefile's test and e2e targets do it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/e2e
runtimes=${E2E_RUNTIMES:-containerd embedded}
mkdir -p "$out/bin" "$out/images" "$out/cache"
log() { printf 'e2e: %s %s\n' "$(date +%T)" "$*" >&2; }

log "building tools, bin/wasmlet and the suite"
# The plugin cases (TestPlugins) load build/plugins; `make e2e` builds them,
# a run of this script alone builds them when missing.
if [ ! -d build/plugins ]; then
  ./hack/build-plugins.sh build/plugins
fi
go build -o "$out/bin/mkimage" ./hack/mkimage
go build -o "$out/bin/cri" ./hack/containerd/cri
make --no-print-directory build
go test -c -tags e2e -o "$out/bin/e2e.test" ./cmd/wasmlet/e2e

# image NAME REF ROOTFS ENTRYPOINT: builds $out/images/NAME.tar unless a
# tarball for the same content (file names, modes, links, bytes) exists.
image() {
  local name=$1 ref=$2 root=$3 entry=$4 key
  key=$( (echo "$ref $entry"; cd "$root" && find . -printf '%p %m %l\n' | sort &&
    find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
  if [ ! -f "$out/images/$name-$key.tar" ]; then
    rm -f "$out/images/$name"-*.tar
    "$out/bin/mkimage" -o "$out/images/$name-$key.tar" -ref "$ref" -entrypoint "$entry" "$root"
  fi
  ln -sf "$name-$key.tar" "$out/images/$name.tar"
}

log "building images"
rootfs=$out/rootfs
rm -rf "$rootfs" && mkdir -p "$rootfs/busybox/bin" "$rootfs/pause" "$rootfs/testbox" "$rootfs/deb"
deb=$(ls "$out"/cache/busybox-static_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
  (cd "$out/cache" && apt-get download busybox-static 2>/dev/null)
  deb=$(ls "$out"/cache/busybox-static_*.deb | head -n1)
fi
dpkg-deb -x "$deb" "$rootfs/deb"
cp "$rootfs/deb/bin/busybox" "$rootfs/busybox/bin/busybox"
for a in $("$rootfs/busybox/bin/busybox" --list); do
  [ "$a" = busybox ] || ln -s busybox "$rootfs/busybox/bin/$a"
done
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/pause/pause" ./hack/pause
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/testbox/testbox" ./examples/workloads/testbox
image busybox wasmlet.local/busybox:1.0 "$rootfs/busybox" /bin/sh
image pause wasmlet.local/pause:1.0 "$rootfs/pause" /pause
image testbox wasmlet.local/testbox:1.0 "$rootfs/testbox" /testbox

# A short base: unix socket paths must stay under 108 bytes.
base=$(mktemp -d /tmp/wle.XXXX)
status=0
cleanup() {
  local rc=$?
  set +e
  # Agents and standalone runtimes started under this base (the suite stops
  # its own; this catches them when the suite itself was killed).
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "^$repo/bin/wasmlet .*$base/"; then
      kill -KILL "${p#/proc/}" 2>/dev/null
    fi
  done
  if [ -f "$base/ctrd/env" ]; then
    hack/containerd/down.sh "$base/ctrd" "$out/bin/cri"
  fi
  if [ "${KEEP_BASE:-0}" = 1 ]; then
    log "logs kept in $base"
  else
    # Mounts the embedded runtime or a crashed agent may have left.
    awk -v b="$base/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$base"
  fi
  exit $(( rc != 0 ? rc : status ))
}
trap cleanup EXIT
trap 'exit 130' INT TERM

suite() { # RUNTIME ENDPOINT IMAGE EXTRA-ARGS...
  local rt=$1 ep=$2 img=$3
  shift 3
  log "suite against $rt ($ep)"
  mkdir -p "$base/$rt"
  (cd cmd/wasmlet/e2e && "$out/bin/e2e.test" -test.v -test.count=1 -test.timeout "${E2E_TIMEOUT:-30m}" \
    ${E2E_RUN:+-test.run "$E2E_RUN"} ${E2E_AGENT_FLAGS:+-agent-flags "$E2E_AGENT_FLAGS"} \
    ${E2E_AGENT_ENV:+-agent-env "$E2E_AGENT_ENV"} \
    -runtime "$rt" -endpoint "$ep" -wasmlet "$repo/bin/wasmlet" -image "$img" \
    -base "$base/$rt" -hack "$repo/hack" "$@") || status=1
}

for rt in $runtimes; do
  case $rt in
  containerd)
    log "starting containerd under $base/ctrd"
    ep=$(hack/containerd/up.sh "$base/ctrd" wasmlet.local/pause:1.0)
    for i in pause busybox testbox; do
      ctr --address "$base/ctrd/c.sock" -n k8s.io images import "$out/images/$i.tar" >/dev/null
    done
    "$out/bin/cri" -e "$ep" -timeout 30s wait
    suite containerd "$ep" wasmlet.local/testbox:1.0 \
      -busybox wasmlet.local/busybox:1.0 -containerd-base "$base/ctrd"
    hack/containerd/down.sh "$base/ctrd" "$out/bin/cri"
    ;;
  embedded)
    if ! grep -q 'usage: wasmlet runtime' <<<"$(bin/wasmlet runtime -h 2>&1 || true)"; then
      log "embedded runtime: skipped (bin/wasmlet has no 'runtime' command yet)"
      continue
    fi
    # testbox for wasip1, as hack/build-plugins.sh puts it (built here when
    # missing, so the script also runs alone).
    wasm=$repo/build/workloads/testbox.wasm
    if [ ! -f "$wasm" ]; then
      wasm=$out/testbox.wasm
      GOOS=wasip1 GOARCH=wasm go build -trimpath -o "$wasm" ./examples/workloads/testbox
    fi
    # A standalone runtime (`wasmlet runtime`), so agents can be restarted
    # without killing workloads; the in-process case starts its own.
    rtroot=$base/embedded/rt
    mkdir -p "$rtroot"
    "$repo/bin/wasmlet" runtime import --root-dir "$rtroot" wasmlet.local/testbox:1.0 "$wasm" >/dev/null
    ep=unix://$base/embedded/rt.sock
    "$repo/bin/wasmlet" runtime --root-dir "$rtroot" --listen "$ep" >"$base/embedded/runtime.log" 2>&1 &
    rtpid=$!
    if ! "$out/bin/cri" -e "$ep" -timeout 30s wait; then
      log "embedded runtime did not start:"; tail -n 20 "$base/embedded/runtime.log" >&2
      status=1; continue
    fi
    suite embedded "$ep" wasmlet.local/testbox:1.0 -wasm "$wasm"
    kill -TERM "$rtpid" 2>/dev/null; wait "$rtpid" 2>/dev/null || true
    ;;
  *) log "unknown runtime $rt"; status=1 ;;
  esac
done
exit $status
