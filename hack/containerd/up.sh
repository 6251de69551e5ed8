#!/usr/bin/env bash
# Starts a private containerd for the end-to-end tests, everything under BASE
# (keep it short: unix socket paths must stay under 108 bytes).
#
#   hack/containerd/up.sh BASE SANDBOX_IMAGE
#   hack/containerd/up.sh BASE          (a restart: the same image and network)
#
# Writes BASE/containerd.toml, a CNI bridge conflist (a private /24 on bridge
# $BRIDGE, default wle<random>), starts containerd with its log in
# BASE/containerd.log and records PID, BRIDGE and SUBNET in BASE/env for
# hack/containerd/down.sh. Prints the CRI endpoint when containerd answers.
# With REGISTRY_ENV set (hack/registry/up.sh's env file), containerd trusts
# that registry's CA (BASE/certs.d/<registry>/hosts.toml); with
# REGISTRY_MIRRORS too (registry hosts, space separated, e.g.
# registry.k8s.io), it pulls those hosts' images through that registry,
# with its credentials (BASE/certs.d/<host>/hosts.toml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${1:?usage: up.sh BASE SANDBOX_IMAGE}
sandbox=${2:-}
mkdir -p "$base"/cni/net.d "$base"/cni/ipam "$base"/opt "$base"/runc
# A random private /24 and bridge name, so two runs on one machine do not clash.
n=$(( (RANDOM % 200) + 20 ))
bridge=${BRIDGE:-wle$n$((RANDOM % 100))}
subnet=${SUBNET:-10.231.$n.0/24}
if [ -f "$base/env" ]; then
  # A restart (the e2e suite stops and starts containerd): keep the network.
  . "$base/env"
  bridge=$BRIDGE subnet=$SUBNET sandbox=${sandbox:-$SANDBOX}
fi
[ -n "$sandbox" ] || { echo "usage: up.sh BASE SANDBOX_IMAGE" >&2; exit 2; }
sed -e "s#@BASE@#$base#g" -e "s#@SANDBOX_IMAGE@#$sandbox#g" "$here/containerd.toml.in" >"$base/containerd.toml"
sed -e "s#@BASE@#$base#g" -e "s#@BRIDGE@#$bridge#g" -e "s#@SUBNET@#$subnet#g" \
  "$here/bridge.conflist.in" >"$base/cni/net.d/10-wasmlet-e2e.conflist"
# REGISTRY_ENV (the env file hack/registry/up.sh wrote): containerd trusts
# that registry's CA, through a hosts.toml under the config_path.
if [ -n "${REGISTRY_ENV:-}" ]; then
  (
    . "$REGISTRY_ENV"
    mkdir -p "$base/certs.d/$REGISTRY"
    printf 'server = "https://%s"\n\n[host."https://%s"]\n  capabilities = ["pull", "resolve"]\n  ca = "%s"\n' \
      "$REGISTRY" "$REGISTRY" "$REGISTRY_CA" >"$base/certs.d/$REGISTRY/hosts.toml"
    # A mirror: the registry first, with a Basic Authorization header on
    # every request (the CRI's pulls carry no credentials for it), the
    # mirrored host itself after it.
    auth=$(printf '%s:%s' "$REGISTRY_USER" "$REGISTRY_PASSWORD" | base64 -w0)
    for m in ${REGISTRY_MIRRORS:-}; do
      mkdir -p "$base/certs.d/$m"
      printf 'server = "https://%s"\n\n[host."https://%s"]\n  capabilities = ["pull", "resolve"]\n  ca = "%s"\n  [host."https://%s".header]\n    Authorization = "Basic %s"\n' \
        "$m" "$REGISTRY" "$REGISTRY_CA" "$REGISTRY" "$auth" >"$base/certs.d/$m/hosts.toml"
      chmod 600 "$base/certs.d/$m/hosts.toml"
    done
  )
fi
containerd --config "$base/containerd.toml" >>"$base/containerd.log" 2>&1 &
pid=$!
printf 'PID=%s\nBRIDGE=%s\nSUBNET=%s\nSANDBOX=%s\n' "$pid" "$bridge" "$subnet" "$sandbox" >"$base/env"
for _ in $(seq 100); do
  if ctr --address "$base/c.sock" version >/dev/null 2>&1; then
    echo "unix://$base/c.sock"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
echo "containerd did not start; log:" >&2
tail -n 30 "$base/containerd.log" >&2
exit 1
