#!/usr/bin/env bash
# What the example plugin directory costs the agent, measured side by side for
# this tree and a baseline commit in one run:
#
#   hack/plugin-costs.sh [memory] [bench] [start]   (memory and bench without
#                                                   arguments)
#
#   BASE=<commit>     the baseline (default main), checked out into a temporary
#                     worktree and built there; BASE_DIR=<dir> uses a checkout
#                     that is already built (make build plugins) instead
#   COUNT=<n>         benchmark and start repetitions per tree, interleaved
#                     (default 3)
#
# memory: for each tree, `wasmlet run` as `make run` runs it (embedded WASI
# runtime, examples/manifests, the tree's own build/plugins), on a port of its
# own:
#   - cold start: seconds from exec to the demo pod Running with an empty
#     compilation cache, and with the cache the first run left (warm);
#   - RSS (and its anonymous part) after 20 s idle with the demo pod running
#     and every plugin called at least once (the script lists any that was
#     not);
#   - the cost of each further plugin: RSS with four more copies of a Go
#     plugin (no-privileged), and with four more of the C one, minus the
#     plain RSS, divided by four, again after 20 s idle;
#   - memory given back: the test plugin hack/plugin-memory/memhog (a Go
#     plugin that fills memory up to its cap, the host default) is added, 12
#     static pods that make it hit its cap follow, and RSS is sampled until a
#     minute after the last rejection.
# bench: the Go benchmarks behind the latency figures, both trees, COUNT
# times interleaved: the 4-policy admission chain on an empty node and with
# 30 and 110 pods on it (p50/p99; host/internal/extension/chainbench, whose
# benchmark file from this tree is copied into the baseline so both run the
# same code), the Go-SDK deny-privileged call (plugintest/shipped) and the
# host's empty call (host/internal/pluginhost; host/plugin in a baseline from
# before the plugin host moved there).
#
# start: the cold start alone, COUNT times per tree in turns (the baseline
# first in odd rounds): seconds from exec to the demo pod Running with the
# tree's build/plugins and an empty compilation cache, as memory's first
# figure.
#
# It is a heavy job: run nothing else heavy beside it. Output: one line per
# figure, "FIGURE <tree> <name> <value>", then the benchmark lines.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${*:-memory bench}
count=${COUNT:-3}
work=$(mktemp -d /tmp/plugin-costs.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${made_worktree:-}" ]; then git worktree remove --force "$made_worktree" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

base_dir=${BASE_DIR:-}
if [ -z "$base_dir" ]; then
  base_dir=$work/base-tree # memory() works in $work/<label>, $work/base for the baseline
  git worktree add --detach "$base_dir" "${BASE:-main}" >/dev/null
  made_worktree=$base_dir
  (cd "$base_dir" && nice make build plugins >/dev/null)
fi
[[ " $what " == *" memory "* ]] && nice make build plugins >/dev/null
[[ " $what " == *" start "* ]] && nice make build >/dev/null && nice ./hack/build-plugins.sh build/plugins >/dev/null
echo "trees: base $(git -C "$base_dir" rev-parse --short HEAD) ($base_dir), new $(git rev-parse --short HEAD)$( [ -n "$(git status --porcelain)" ] && echo ' +changes')"

figure() { echo "FIGURE $1 $2 $3"; }

# rss PID: resident and anonymous resident MB.
rss() {
  awk '/^Rss:/{r=$2} /^Pss_Anon:/{a=$2} END{printf "%.1f %.1f\n", r/1024, a/1024}' "/proc/$1/smaps_rollup"
}

# start TREE STATE PLUGINS MANIFESTS PORT: runs the tree's agent; sets $agent.
start() {
  local tree=$1 state=$2 plugins=$3 manifests=$4 port=$5
  mkdir -p "$state/root" "$state/pods"
  "$tree/bin/wasmlet" runtime import --root-dir "$state/root/runtime" wasmlet.local/testbox:latest \
    "$tree/build/workloads/testbox.wasm" >/dev/null
  t0=$(date +%s.%N)
  "$tree/bin/wasmlet" run --node-name costs --pod-manifest-path "$manifests" --plugin-dir "$plugins" \
    --root-dir "$state/root" --pod-logs-dir "$state/pods" --read-only-port "$port" >"$state/agent.log" 2>&1 &
  agent=$!
  pids+=("$agent")
}

# running PORT POD: waits for POD (static: POD-costs) to be Running, prints
# the seconds since start.
running() {
  local i
  for i in $(seq 1 3000); do
    if curl -sf "http://127.0.0.1:$1/pods" 2>/dev/null | python3 -c '
import json, sys
pods = json.load(sys.stdin)["items"]
sys.exit(0 if any(p["metadata"]["name"] == sys.argv[1] and p.get("status", {}).get("phase") == "Running" for p in pods) else 1)' "$2-costs" 2>/dev/null; then
      echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.1f\n'
      return
    fi
    sleep 0.1
  done
  echo "timeout"
}

stop() {
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
}

# plugin_field PORT NAME FIELD: a field of /plugins for plugin NAME.
plugin_field() {
  curl -sf "http://127.0.0.1:$1/plugins" | python3 -c '
import json, sys
for p in json.load(sys.stdin)["plugins"]:
    if p.get("name") == sys.argv[1]:
        print(p.get(sys.argv[2], 0))' "$2" "$3" 2>/dev/null
}

uncalled() {
  curl -sf "http://127.0.0.1:$1/plugins" | python3 -c '
import json, sys
print(",".join(p["name"] for p in json.load(sys.stdin)["plugins"] if not p.get("calls")) or "none")'
}

# copies DIR NAME N: N copies of plugin NAME in DIR under new names.
copies() {
  local i
  for i in $(seq 1 "$3"); do
    cp "$1/$2.wasm" "$1/$2-x$i.wasm"
    sed -e "s/^name: .*/name: $2-x$i/" -e "s/^wasm: .*/wasm: $2-x$i.wasm/" "$1/$2.plugin.yaml" >"$1/$2-x$i.plugin.yaml"
  done
}

memory() {
  local label=$1 tree=$2 port=$3
  local d=$work/$label
  mkdir -p "$d/manifests"
  cp "$root/examples/manifests/hello.yaml" "$d/manifests/"
  cp -r "$tree/build/plugins" "$d/plugins"

  # Cold: an empty compilation cache.
  start "$tree" "$d/cold" "$d/plugins" "$d/manifests" "$port"
  figure "$label" cold-start-s "$(running "$port" hello)"
  sleep 20
  figure "$label" uncalled-plugins "$(uncalled "$port")"
  read -r r a < <(rss "$agent")
  figure "$label" rss-idle-MB "$r"
  figure "$label" rss-idle-anon-MB "$a"

  # Memory given back after a burst of faults.
  cp "$memhog/memhog.wasm" "$memhog/memhog.plugin.yaml" "$d/plugins/"
  for i in $(seq 1 100); do [ "$(plugin_field "$port" memhog state)" = loaded ] && break; sleep 0.2; done
  sleep 20
  read -r before _ < <(rss "$agent")
  figure "$label" rss-before-faults-MB "$before"
  for i in $(seq 1 12); do
    sed -e "s/name: hello/name: memhog-$i/" -e 's/^  labels:/  annotations:\n    wasmlet.io\/memhog: "true"\n  labels:/' \
      "$root/examples/manifests/hello.yaml" >"$d/manifests/memhog-$i.yaml"
  done
  local peak=0 errs=0 t
  for i in $(seq 1 600); do
    errs=$(plugin_field "$port" memhog errors)
    read -r r _ < <(rss "$agent")
    peak=$(echo "if ($r > $peak) $r else $peak" | bc)
    [ "${errs:-0}" -ge 12 ] && break
    sleep 0.5
  done
  figure "$label" memhog-faults "$errs"
  figure "$label" rss-peak-during-faults-MB "$peak"
  local back=never
  for t in $(seq 0 5 60); do
    read -r r _ < <(rss "$agent")
    [ $t = 0 ] && figure "$label" rss-right-after-faults-MB "$r"
    if [ "$back" = never ] && [ "$(echo "$r <= $before * 1.1" | bc)" = 1 ]; then back=$t; fi
    [ $t = 60 ] && break
    sleep 5
  done
  figure "$label" rss-60s-after-faults-MB "$r"
  figure "$label" back-within-10pct-after-s "$back"
  stop
  rm -f "$d/plugins"/memhog.* "$d/manifests"/memhog-*.yaml

  # Warm: the compilation cache the cold run left.
  warm() {
    rm -rf "$d/$1"
    mkdir -p "$d/$1/root"
    cp -r "$d/cold/root/plugin-cache" "$d/$1/root/"
    start "$tree" "$d/$1" "$2" "$d/manifests" "$port"
    local s
    s=$(running "$port" hello)
    sleep 20
    read -r r a < <(rss "$agent")
    stop
    echo "$s $r"
  }
  read -r s plain < <(warm warm "$d/plugins")
  figure "$label" warm-start-s "$s"
  figure "$label" rss-idle-warm-MB "$plain"
  cp -r "$d/plugins" "$d/plugins-go"
  copies "$d/plugins-go" no-privileged 4
  read -r _ r < <(warm warm-go "$d/plugins-go")
  figure "$label" MB-per-extra-go-plugin "$(echo "scale=1; ($r - $plain) / 4" | bc)"
  cp -r "$d/plugins" "$d/plugins-c"
  copies "$d/plugins-c" deny-privileged-c 4
  read -r _ r < <(warm warm-c "$d/plugins-c")
  figure "$label" MB-per-extra-c-plugin "$(echo "scale=1; ($r - $plain) / 4" | bc)"
}

# coldstart LABEL TREE PORT ROUND: the seconds from exec to the demo pod
# Running, with TREE's build/plugins and an empty compilation cache.
coldstart() {
  local label=$1 tree=$2 port=$3 d=$work/start-$1-$4
  mkdir -p "$d/manifests"
  cp "$root/examples/manifests/hello.yaml" "$d/manifests/"
  start "$tree" "$d" "$tree/build/plugins" "$d/manifests" "$port"
  figure "$label" cold-start-s "$(running "$port" hello)"
  stop
  rm -rf "$d"
}

# hostpkg TREE: the plugin host's package in TREE.
hostpkg() {
  if [ -d "$1/host/internal/pluginhost" ]; then echo ./host/internal/pluginhost/; else echo ./host/plugin/; fi
}

bench() {
  # The same chain benchmark in both trees; in a baseline from before the
  # plugin host moved to host/internal/pluginhost and the plugin build to
  # internal/wasmbuild, under their old names.
  local chain=host/internal/extension/chainbench/chain_test.go
  local old=()
  [ -d "$base_dir/host/internal/pluginhost" ] ||
    old+=(-e 's#wasmlet/host/internal/pluginhost"#wasmlet/host/plugin"#' -e 's/\bpluginhost\./plugin./g')
  [ -d "$base_dir/internal/wasmbuild" ] ||
    old+=(-e 's#wasmlet/internal/wasmbuild"#wasmlet/plugintest"#' -e 's/\bwasmbuild\.Go(/plugintest.BuildGo(/g' -e 's/\bwasmbuild\.CacheDir(/plugintest.CacheDir(/g')
  sed -e '' ${old[@]+"${old[@]}"} "$chain" >"$base_dir/$chain"
  local i tree
  for i in $(seq 1 "$count"); do
    for tree in base new; do
      local dir=$root
      [ $tree = base ] && dir=$base_dir
      echo "== $tree, round $i"
      (cd "$dir" && nice go test -run '^$' -bench 'Chain/(wasm|wasm-30-pods-on-node|wasm-110-pods-on-node)$' -benchtime 2000x ./host/internal/extension/chainbench/ | grep '^Benchmark')
      (cd "$dir" && nice go test -run '^$' -bench 'Admit/wasm-go-sdk$/' -benchtime 2000x ./plugintest/shipped/ | grep '^Benchmark')
      (cd "$dir" && nice go test -run '^$' -bench 'Plugin_Call/empty/(none|meter)$' -benchtime 200000x "$(hostpkg "$dir")" | grep '^Benchmark')
    done
  done
  git -C "$base_dir" checkout -- host/internal/extension/chainbench/chain_test.go
}

if [[ " $what " == *" memory "* ]]; then
  memhog=$work/memhog
  ./hack/build-plugins.sh "$memhog" hack/plugin-memory/memhog >/dev/null
  memory base "$base_dir" 21711
  memory new "$root" 21712
fi
if [[ " $what " == *" bench "* ]]; then
  bench
fi
if [[ " $what " == *" start "* ]]; then
  for i in $(seq 1 "$count"); do
    for tree in base new; do
      [ $((i % 2)) = 0 ] && tree=$([ $tree = base ] && echo new || echo base)
      dir=$root
      [ $tree = base ] && dir=$base_dir
      coldstart "$tree" "$dir" 21713 "$i"
    done
  done
fi
