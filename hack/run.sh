#!/usr/bin/env bash
# What `make run` runs, after `make build plugins`: the agent with the
# embedded WASI runtime (no --container-runtime-endpoint), the static pods of
# examples/manifests and the plugins of build/plugins. The testbox workload
# (build/workloads/testbox.wasm) is imported into the runtime's image store as
# wasmlet.local/testbox:latest first.
#
# State goes under $WASMLET_RUN_DIR (default ./.wasmlet-run, or a directory
# under /tmp when the checkout's path is too long for a unix socket).
# WASMLET_PORT sets the read-only port (default 10255). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=bin/wasmlet
wasm=build/workloads/testbox.wasm
[ -x "$bin" ] || { echo "run: $bin is missing: run 'make build'" >&2; exit 1; }
[ -f "$wasm" ] || { echo "run: $wasm is missing: run 'make plugins'" >&2; exit 1; }

state=${WASMLET_RUN_DIR:-$PWD/.wasmlet-run}
# <state>/root/runtime/cri.sock must fit in a unix socket path (108 bytes).
if [ ${#state} -gt 80 ]; then
  state=/tmp/wasmlet-run-$(id -u)
fi
root=$state/root
logs=$state/pods
port=${WASMLET_PORT:-10255}
node=${WASMLET_NODE:-$(hostname | tr "[:upper:]" "[:lower:]")}
mkdir -p "$root" "$logs"

"$bin" runtime import --root-dir "$root/runtime" wasmlet.local/testbox:latest "$wasm" >/dev/null

cat <<INFO
wasmlet: node $node, state in $state
  pods:     curl -s http://127.0.0.1:$port/pods
  pod log:  tail -f $logs/default_hello-${node}_*/testbox/*.log
  health:   curl -s http://127.0.0.1:$port/healthz
INFO

exec "$bin" run \
  --node-name "$node" \
  --pod-manifest-path examples/manifests \
  --plugin-dir build/plugins \
  --root-dir "$root" \
  --pod-logs-dir "$logs" \
  --read-only-port "$port"
