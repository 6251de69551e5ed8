#!/usr/bin/env bash
# What a plugin from a registry costs the agent, beside the same plugins from
# the plugin directory, in one run:
#
#   hack/plugin-fetch-figures.sh
#
# Two Go-SDK plugins (no-privileged, image-allowlist from build/plugins) are
# pushed to a private registry (hack/registry/up.sh: TLS, htpasswd) and signed
# with a cosign key; the agent runs as `make run` runs it (embedded WASI
# runtime, examples/manifests/hello.yaml), once with the two plugins in its
# plugin directory ("dir") and once with two reference manifests naming them
# in the registry, under a node policy that requires the signature
# ("remote"). For each:
#   - cold: an empty root dir (no compilation cache, no digest cache): seconds
#     from exec to both plugins loaded in /plugins — for "remote" that is
#     resolve + pull + verify + compile;
#   - cached: the root dir the cold run left (compilation cache, and for
#     "remote" the digest cache) with the registry STOPPED: seconds from exec
#     to both loaded;
#   - RSS (and its anonymous part) of the agent after 20 s idle with the
#     hello pod Running and both plugins called.
# Output: "FIGURE <dir|remote> <name> <value>" lines. A heavy job: run
# nothing else heavy beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
port=${PORT:-10291}
work=$(mktemp -d /tmp/plugin-fetch-figures.XXXXXX)
agent=
cleanup() {
  [ -n "$agent" ] && { kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; }
  [ -f "$work/registry/env" ] && hack/registry/down.sh "$work/registry" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

make build plugins >/dev/null
# shellcheck source=lib/signed-plugins.sh
. hack/lib/signed-plugins.sh
# The registry, the signing key and the node policy; the two plugins pushed
# and signed.
signed_registry "$work"
plugins=(no-privileged image-allowlist)

figure() { echo "FIGURE $1 $2 $3"; }

mkdir -p "$work/dir" "$work/remote" "$work/manifests"
cp examples/manifests/hello.yaml "$work/manifests/"
for p in "${plugins[@]}"; do
  cp "build/plugins/$p.wasm" "build/plugins/$p.plugin.yaml" "$work/dir/"
  src=$work/src-$p
  mkdir -p "$src"
  cp "build/plugins/$p.wasm" "build/plugins/$p.plugin.yaml" "$src/"
  ref=$REGISTRY/figures/$p:1
  push_signed bin/wasmlet "$work" "$src" "$ref" >/dev/null
  reference_manifest "build/plugins/$p.plugin.yaml" "$ref" >"$work/remote/$p.plugin.yaml"
done

# start LABEL STATE PLUGINS [FLAGS...]: runs the agent; sets $agent, $t0.
start() {
  local state=$2 plugins=$3
  shift 3
  mkdir -p "$state/root" "$state/pods"
  bin/wasmlet runtime import --root-dir "$state/root/runtime" wasmlet.local/testbox:latest \
    build/workloads/testbox.wasm >/dev/null
  t0=$(date +%s.%N)
  bin/wasmlet run --node-name figures --pod-manifest-path "$work/manifests" --plugin-dir "$plugins" \
    --root-dir "$state/root" --pod-logs-dir "$state/pods" --read-only-port "$port" --healthz-port 0 "$@" >"$state/agent.log" 2>&1 &
  agent=$!
}

stop() {
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  agent=
}

# loaded: seconds from $t0 until every plugin is loaded in /plugins.
loaded() {
  local i
  for i in $(seq 1 3000); do
    if curl -sf "http://127.0.0.1:$port/plugins" 2>/dev/null | python3 -c '
import json, sys
ps = {p["name"]: p for p in json.load(sys.stdin)["plugins"]}
sys.exit(0 if all(ps.get(n, {}).get("state") == "loaded" for n in sys.argv[1:]) else 1)' "${plugins[@]}" 2>/dev/null; then
      echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.2f\n'
      return
    fi
    sleep 0.05
  done
  echo timeout
}

# idle LABEL: RSS after the hello pod runs, every plugin called, 20 s idle.
idle() {
  local i
  for i in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/pods" 2>/dev/null | grep -q '"phase":"Running"' && break
    sleep 0.1
  done
  sleep 20
  figure "$1" uncalled-plugins "$(curl -sf "http://127.0.0.1:$port/plugins" | python3 -c '
import json, sys
print(",".join(p["name"] for p in json.load(sys.stdin)["plugins"] if not p.get("calls")) or "none")')"
  awk -v l="$1" '/^Rss:/{r=$2} /^Pss_Anon:/{a=$2} END{printf "FIGURE %s rss-idle-MB %.1f\nFIGURE %s rss-idle-anon-MB %.1f\n", l, r/1024, l, a/1024}' "/proc/$agent/smaps_rollup"
}

remote_flags=(--plugin-verification-policy "$work/policy.yaml" --plugin-registry-config "$REGISTRY_CONFIG"
  --plugin-registry-ca "$REGISTRY_CA")

start dir "$work/dir-cold" "$work/dir"
figure dir cold-to-loaded-s "$(loaded)"
idle dir
stop
start remote "$work/remote-cold" "$work/remote" "${remote_flags[@]}"
figure remote cold-to-loaded-s "$(loaded)"
figure remote verified "$(curl -sf "http://127.0.0.1:$port/plugins" | python3 -c '
import json, sys
print(",".join(p["name"] + "=" + str(p.get("verified")) for p in json.load(sys.stdin)["plugins"]))')"
idle remote
stop

# Cached: the root dirs the cold runs left; the registry stopped.
hack/registry/down.sh "$work/registry" >/dev/null
# cached STATE FROM DIRS...: a new state with FROM's root subdirectories DIRS.
cached() {
  local d
  mkdir -p "$1/root"
  for d in "${@:3}"; do cp -r "$2/root/$d" "$1/root/"; done
}
cached "$work/dir-cached" "$work/dir-cold" plugin-cache
start dir "$work/dir-cached" "$work/dir"
figure dir cached-to-loaded-s "$(loaded)"
stop
cached "$work/remote-cached" "$work/remote-cold" plugin-cache plugins
start remote "$work/remote-cached" "$work/remote" "${remote_flags[@]}"
figure remote cached-to-loaded-s "$(loaded)"
figure remote cached-registry-down "$(grep -c 'plugin fetch failed' "$work/remote-cached/agent.log" || true) failed re-resolutions logged"
stop
