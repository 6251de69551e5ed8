#!/usr/bin/env bash
# What `make run` runs, after `make build plugins`: the agent on the
# embedded WASI runtime, the static pods of examples/manifests and the
# plugins of build/plugins. The testbox workload (build/workloads/testbox.wasm)
# is imported into the runtime's image store as wasmlet.local/testbox:latest
# first.
#
# The runtime runs as its own process (`wasmlet runtime`, in its own session,
# log <state>/runtime.log, pid <state>/runtime.pid), started here when none
# serves <state>/root/runtime; the agent talks to it over its socket. So, as
# containerd's shims outlive containerd, the pods outlive the agent: Ctrl-C
# and `make run` again, and the demo pod runs on, restartCount 0. Stop the
# runtime, and its pods, with: kill "$(cat <state>/runtime.pid)".
#
# State goes under $WASMLET_RUN_DIR (default ./.wasmlet-run, or a directory
# under /tmp when the checkout's path is too long for a unix socket).
# WASMLET_PORT sets the read-only port (default 10255); WASMLET_BIN,
# WASMLET_TESTBOX and WASMLET_PLUGIN_DIR replace bin/wasmlet,
# build/workloads/testbox.wasm and build/plugins. Ctrl-C stops the agent.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${WASMLET_BIN:-bin/wasmlet}
wasm=${WASMLET_TESTBOX:-build/workloads/testbox.wasm}
plugins=${WASMLET_PLUGIN_DIR:-build/plugins}
[ -x "$bin" ] || { echo "run: $bin is missing: run 'make build'" >&2; exit 1; }
[ -f "$wasm" ] || { echo "run: $wasm is missing: run 'make plugins'" >&2; exit 1; }

state=${WASMLET_RUN_DIR:-$PWD/.wasmlet-run}
# <state>/root/pod-resources/kubelet.sock, the longest of the agent's
# sockets, must fit in a unix socket path (107 bytes and a NUL).
if [ ${#state} -gt 75 ]; then
  state=/tmp/wasmlet-run-$(id -u)
fi
root=$state/root
logs=$state/pods
port=${WASMLET_PORT:-10255}
node=${WASMLET_NODE:-$(hostname | tr "[:upper:]" "[:lower:]")}
mkdir -p "$root" "$logs"

"$bin" runtime import --root-dir "$root/runtime" wasmlet.local/testbox:latest "$wasm" >/dev/null

# The runtime holds an flock on <root>/runtime/lock while it runs: when the
# lock is free, none runs, so start one, detached from this terminal.
rtlock=$root/runtime/lock
sock=$root/runtime/cri.sock
if flock -n "$rtlock" true; then
  setsid "$bin" runtime --root-dir "$root/runtime" >>"$state/runtime.log" 2>&1 </dev/null &
  echo $! >"$state/runtime.pid"
  for _ in $(seq 300); do
    if [ -S "$sock" ] && ! flock -n "$rtlock" true; then break; fi
    kill -0 "$(cat "$state/runtime.pid")" 2>/dev/null || { echo "run: the runtime exited; see $state/runtime.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "wasmlet: runtime started (pid $(cat "$state/runtime.pid"), log $state/runtime.log)"
else
  echo "wasmlet: runtime already running (pid $(cat "$state/runtime.pid" 2>/dev/null || echo unknown)); its pods carry on"
fi

cat <<INFO
wasmlet: node $node, state in $state
  pods:     curl -s http://127.0.0.1:$port/pods
  pod log:  tail -f $logs/default_hello-${node}_*/testbox/*.log
  health:   curl -s http://127.0.0.1:$port/healthz
INFO

exec "$bin" run \
  --node-name "$node" \
  --pod-manifest-path examples/manifests \
  --container-runtime-endpoint "unix://$sock" \
  --plugin-dir "$plugins" \
  --root-dir "$root" \
  --pod-logs-dir "$logs" \
  --read-only-port "$port"
