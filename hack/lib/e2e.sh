# shellcheck shell=bash
# What hack/e2e.sh and hack/e2e-apiserver.sh share; sourced by both after
#   set -euo pipefail; cd "$(dirname "$0")/.."
# with these set by the caller:
#   repo   the repository (absolute)
#   out    build/e2e (tools in $out/bin, images in $out/images, caches)
#   log    a function printing one progress line to stderr
# It sets base (a short state directory), status (0, or 1 once a suite
# failed) and the cleanup trap; e2e_runtime_up sets ep (and rtpid for the
# embedded runtime).

mkdir -p "$out/bin" "$out/images" "$out/cache"
# shellcheck source=kubelet-config.sh
. hack/lib/kubelet-config.sh
# shellcheck source=cleanup.sh
. hack/lib/cleanup.sh

# e2e_tools: bin/wasmlet and the tools (mkimage, the bare CRI client).
e2e_tools() {
  make --no-print-directory build
  go build -o "$out/bin/mkimage" ./hack/mkimage
  go build -o "$out/bin/cri" ./hack/containerd/cri
}

# e2e_image NAME REF ROOTFS ENTRYPOINT: builds $out/images/NAME.tar unless a
# tarball for the same content (file names, modes, links, bytes) exists.
e2e_image() {
  local name=$1 ref=$2 root=$3 entry=$4 key
  key=$( (echo "$ref $entry"; cd "$root" && find . -printf '%p %m %l\n' | sort &&
    find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
  if [ ! -f "$out/images/$name-$key.tar" ]; then
    rm -f "$out/images/$name"-*.tar
    "$out/bin/mkimage" -o "$out/images/$name-$key.tar" -ref "$ref" -entrypoint "$entry" "$root"
  fi
  ln -sf "$name-$key.tar" "$out/images/$name.tar"
}

# e2e_images [busybox]: the pause and testbox images as
# wasmlet.local/NAME:1.0, and busybox too when asked (from Debian's
# busybox-static, its .deb cached in $out/cache).
e2e_images() {
  local rootfs=$out/rootfs deb a
  rm -rf "$rootfs" && mkdir -p "$rootfs/pause" "$rootfs/testbox"
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/pause/pause" ./hack/pause
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$rootfs/testbox/testbox" ./examples/workloads/testbox
  e2e_image pause wasmlet.local/pause:1.0 "$rootfs/pause" /pause
  e2e_image testbox wasmlet.local/testbox:1.0 "$rootfs/testbox" /testbox
  if [ "${1:-}" = busybox ]; then
    mkdir -p "$rootfs/busybox/bin" "$rootfs/deb"
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
    e2e_image busybox wasmlet.local/busybox:1.0 "$rootfs/busybox" /bin/sh
  fi
}

# e2e_testbox_wasm: builds testbox for wasip1 as $out/testbox.wasm (always:
# the Go build cache makes it cheap, and it cannot be staler than the native
# testbox image) and prints its path.
e2e_testbox_wasm() {
  GOOS=wasip1 GOARCH=wasm go build -trimpath -o "$out/testbox.wasm" ./examples/workloads/testbox
  echo "$out/testbox.wasm"
}

# e2e_runtime_up containerd IMAGE...: a private containerd under $base/ctrd
# with $out/images/IMAGE.tar imported into namespace k8s.io.
# e2e_runtime_up embedded WASM: a standalone `wasmlet runtime` under
# $base/embedded (agents can restart without killing workloads) with WASM
# imported as wasmlet.local/testbox:1.0; rtpid is its process.
# Either sets ep to the CRI endpoint once it answers; fails otherwise.
e2e_runtime_up() {
  local rt=$1 i
  shift
  case $rt in
  containerd)
    log "starting containerd under $base/ctrd"
    ep=$(hack/containerd/up.sh "$base/ctrd" wasmlet.local/pause:1.0)
    for i in "$@"; do
      ctr --address "$base/ctrd/c.sock" -n k8s.io images import "$out/images/$i.tar" >/dev/null
    done
    "$out/bin/cri" -e "$ep" -timeout 30s wait
    ;;
  embedded)
    local rtroot=$base/embedded/rt
    # Called as `e2e_runtime_up … || …`, where set -e does not hold: each
    # step returns on failure itself.
    mkdir -p "$rtroot" || return 1
    "$repo/bin/wasmlet" runtime import --root-dir "$rtroot" wasmlet.local/testbox:1.0 "$1" >/dev/null || return 1
    ep=unix://$base/embedded/rt.sock
    "$repo/bin/wasmlet" runtime --root-dir "$rtroot" --listen "$ep" \
      ${REGISTRY_ENV:+--registry-ca "$(. "$REGISTRY_ENV" && echo "$REGISTRY_CA")"} >"$base/embedded/runtime.log" 2>&1 &
    rtpid=$!
    if ! "$out/bin/cri" -e "$ep" -timeout 30s wait; then
      log "embedded runtime did not start:"; tail -n 20 "$base/embedded/runtime.log" >&2
      return 1
    fi
    ;;
  esac
}

# e2e_runtime_down containerd|embedded: stops what e2e_runtime_up started.
e2e_runtime_down() {
  case $1 in
  containerd) hack/containerd/down.sh "$base/ctrd" "$out/bin/cri" ;;
  embedded) kill -TERM "$rtpid" 2>/dev/null; wait "$rtpid" 2>/dev/null || true ;;
  esac
}

# e2e_kubelet_config ENDPOINT CLIENT_CA ADDRESS PORT LOGS_DIR: the real
# kubelet's KubeletConfiguration (kubelet_config) with the kubelet API's
# webhook authentication and authorization as a cluster node has them;
# callers append lines of their own.
e2e_kubelet_config() {
  kubelet_config containerRuntimeEndpoint="$1" anonymousEnabled=false webhookEnabled=true clientCAFile="$2" \
    authorizationMode=Webhook address="$3" port="$4" readOnlyPort=0 podLogsDir="$5"
}

# A short base: unix socket paths must stay under 108 bytes.
base=$(mktemp -d "/tmp/${E2E_BASE_PREFIX:-wle}.XXXX")
status=0

# e2e_cleanup_more: a caller may define it; the trap calls it before the
# base goes.
e2e_cleanup() {
  local rc=$?
  set +e
  # Agents and standalone runtimes started under this base (the suite stops
  # its own; this catches them when the suite itself was killed).
  kill_matching "^$repo/bin/wasmlet .*$base/"
  if [ -f "$base/ctrd/env" ]; then
    hack/containerd/down.sh "$base/ctrd" "$out/bin/cri"
  fi
  if declare -F e2e_cleanup_more >/dev/null; then
    e2e_cleanup_more
  fi
  if [ "${KEEP_BASE:-0}" = 1 ]; then
    log "logs kept in $base"
  else
    # Mounts the embedded runtime or a crashed agent may have left.
    umount_under "$base"
    rm -rf --one-file-system "$base"
  fi
  exit $(( rc != 0 ? rc : status ))
}
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM
