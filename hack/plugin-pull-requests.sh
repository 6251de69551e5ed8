#!/usr/bin/env bash
# The registry requests one node makes to pull one signed plugin: a private
# registry (hack/registry/up.sh: Debian's docker-registry, TLS, htpasswd)
# holds one Go-SDK plugin (no-privileged), pushed and signed with a cosign
# key; the agent starts (embedded WASI runtime, no pods) with a reference
# manifest naming it by tag under a node policy that requires the
# signature, as a node does on a rollout, and runs until the plugin is
# loaded and 3 s more (what the agent does right after the load counts). The registry's
# access-log lines the agent caused are printed (method, path, status),
# then "FIGURE requests N".
#
#   hack/plugin-pull-requests.sh [WASMLET-BINARY]
#
# WASMLET-BINARY defaults to bin/wasmlet; the plugin comes from
# build/plugins (make build plugins), or from $PLUGINS.
set -euo pipefail
cd "$(dirname "$0")/.."
wasmlet=$(realpath "${1:-bin/wasmlet}")
plugins=${PLUGINS:-build/plugins}
port=${PORT:-10292}
work=$(mktemp -d /tmp/plugin-pull-requests.XXXXXX)
agent=
cleanup() {
  [ -n "$agent" ] && { kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; }
  [ -f "$work/registry/env" ] && hack/registry/down.sh "$work/registry" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=lib/signed-plugins.sh
. hack/lib/signed-plugins.sh
signed_registry "$work"
p=no-privileged
mkdir -p "$work/src" "$work/remote" "$work/manifests" "$work/root" "$work/pods"
cp "$plugins/$p.wasm" "$plugins/$p.plugin.yaml" "$work/src/"
ref=$REGISTRY/fleet/$p:1
digest=$(push_signed "$wasmlet" "$work" "$work/src" "$ref")
reference_manifest "$plugins/$p.plugin.yaml" "$ref" >"$work/remote/$p.plugin.yaml"

log=$work/registry/registry.log
mark=$(wc -l <"$log")
"$wasmlet" run --node-name pull-requests --pod-manifest-path "$work/manifests" --plugin-dir "$work/remote" \
  --root-dir "$work/root" --pod-logs-dir "$work/pods" --read-only-port "$port" --healthz-port 0 \
  --plugin-verification-policy "$work/policy.yaml" --plugin-registry-config "$REGISTRY_CONFIG" \
  --plugin-registry-ca "$REGISTRY_CA" >"$work/agent.log" 2>&1 &
agent=$!
state=
for _ in $(seq 1 1200); do
  state=$(curl -sf "http://127.0.0.1:$port/plugins" 2>/dev/null | python3 -c '
import json, sys
print(next((p.get("state", "") for p in json.load(sys.stdin)["plugins"] if p["name"] == sys.argv[1]), ""))' "$p" 2>/dev/null || true)
  [ "$state" = loaded ] && break
  kill -0 "$agent" 2>/dev/null || break
  sleep 0.1
done
if [ "$state" != loaded ]; then
  echo "plugin-pull-requests: $p not loaded (state '$state'); agent log:" >&2
  tail -n 30 "$work/agent.log" >&2
  exit 1
fi
# What follows the load at once (a resolution round asked for by the new
# reference) is part of the pull.
sleep 3
kill "$agent"
wait "$agent" 2>/dev/null || true
agent=
tail -n +"$((mark + 1))" "$log" | sed -n 's/.*\] "\([A-Z]*\) \([^ ]*\) [^"]*" \([0-9]*\) .*/\1 \2 \3/p' >"$work/requests"
sed "s/$digest/DIGEST/g; s/${digest#sha256:}/HEX/g" "$work/requests"
echo "FIGURE requests $(wc -l <"$work/requests")"
