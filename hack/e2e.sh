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
#   before those, plugins in a registry (cmd/wasmlet/e2eregistry: push, pull,
#   credentials, signatures checked both ways with cosign v2.6.5 built by
#   hack/cosign/build.sh, ~150 s the first time) against a private
#   docker-registry with TLS and htpasswd (hack/registry/up.sh), seconds;
#   the registry stays up for both runtime suites (TestRegistryPlugins: an
#   agent pulling, verifying, following a moved tag, an outage, a restart
#   from the cache);
#   4. tears everything down from a trap (agents, pods via CRI, containerd,
#      mounts, the CNI bridge), so a failing test leaves the machine clean.
# Steps 1, 2 and 4 are shared with hack/e2e-apiserver.sh (hack/lib/e2e.sh).
#
# Environment: E2E_RUNTIMES (default "containerd embedded"), E2E_REGISTRY=0
# skips the registry suite, E2E_RUN (a -run
# pattern), E2E_TIMEOUT (default 30m), E2E_AGENT_FLAGS and E2E_AGENT_ENV (extra
# flags and environment for every `wasmlet run`), KEEP_BASE=1 keeps logs.
# Assumes hack/install-deps.sh ran (the Makefile's test and e2e targets do it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/build/e2e
runtimes=${E2E_RUNTIMES:-containerd embedded}
log() { printf 'e2e: %s %s\n' "$(date +%T)" "$*" >&2; }
E2E_BASE_PREFIX=wle
. hack/lib/e2e.sh

log "building tools, bin/wasmlet and the suite"
# The plugin cases (TestPlugins) load build/plugins; `make e2e` builds them,
# a run of this script alone builds them when missing.
if [ ! -d build/plugins ]; then
  ./hack/build-plugins.sh build/plugins
fi
e2e_tools
go test -c -tags e2e -o "$out/bin/e2e.test" ./cmd/wasmlet/e2e
go test -c -tags e2e -o "$out/bin/e2eregistry.test" ./cmd/wasmlet/e2eregistry

# The registry the suite started, also when the suite was killed.
e2e_cleanup_more() {
  if [ -f "$base/registry/env" ]; then
    hack/registry/down.sh "$base/registry"
  fi
}

# The registry stays up for the runtime suites, whose TestRegistryPlugins
# runs agents that pull from it (and stops and restarts it).
registry_args=()
if [ "${E2E_REGISTRY:-1}" != 0 ]; then
  log "plugins in a registry (hack/registry/up.sh)"
  # cosign, for the signing cases: built once per version and cached.
  cosign=$(hack/cosign/build.sh) || status=1
  if [ -n "${cosign:-}" ] && hack/registry/up.sh "$base/registry" >/dev/null; then
    registry_args=(-registry-env "$base/registry/env" -cosign "$cosign")
    # containerd and the embedded runtime trust the registry's CA
    # (hack/containerd/up.sh, e2e_runtime_up), for TestImageCredentials.
    export REGISTRY_ENV=$base/registry/env
    (cd cmd/wasmlet/e2eregistry && "$out/bin/e2eregistry.test" -test.v -test.count=1 \
      -test.timeout "${E2E_TIMEOUT:-30m}" ${E2E_RUN:+-test.run "$E2E_RUN"} \
      -registry-env "$base/registry/env" -wasmlet "$repo/bin/wasmlet" -repo "$repo" \
      -cosign "$cosign") || status=1
  else
    status=1
  fi
fi

log "building images"
e2e_images busybox

suite() { # RUNTIME ENDPOINT IMAGE EXTRA-ARGS...
  local rt=$1 ep=$2 img=$3
  shift 3
  log "suite against $rt ($ep)"
  mkdir -p "$base/$rt"
  (cd cmd/wasmlet/e2e && "$out/bin/e2e.test" -test.v -test.count=1 -test.timeout "${E2E_TIMEOUT:-30m}" \
    ${E2E_RUN:+-test.run "$E2E_RUN"} ${E2E_AGENT_FLAGS:+-agent-flags "$E2E_AGENT_FLAGS"} \
    ${E2E_AGENT_ENV:+-agent-env "$E2E_AGENT_ENV"} \
    -runtime "$rt" -endpoint "$ep" -wasmlet "$repo/bin/wasmlet" -image "$img" \
    -base "$base/$rt" -hack "$repo/hack" ${registry_args[@]+"${registry_args[@]}"} "$@") || status=1
}

for rt in $runtimes; do
  case $rt in
  containerd)
    e2e_runtime_up containerd pause busybox testbox
    suite containerd "$ep" wasmlet.local/testbox:1.0 \
      -busybox wasmlet.local/busybox:1.0 -containerd-base "$base/ctrd"
    e2e_runtime_down containerd
    ;;
  embedded)
    wasm=$(e2e_testbox_wasm)
    e2e_runtime_up embedded "$wasm" || { status=1; continue; }
    suite embedded "$ep" wasmlet.local/testbox:1.0 -wasm "$wasm"
    e2e_runtime_down embedded
    ;;
  *) log "unknown runtime $rt"; status=1 ;;
  esac
done
exit $status
