#!/usr/bin/env bash
# Installs the Debian packages wasmlet's build and tests need. Idempotent: a
# package already present is skipped, so repeated `make test` runs are quick.
set -euo pipefail
# curl, openssl and iproute2: the control plane scripts (PKI, health checks) and
# the conformance node (its IP; the agnhost image carries the host's curl).
# docker-registry and apache2-utils (htpasswd): the private registry of the
# plugin registry tests (hack/registry/up.sh).
pkgs=(clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32 wabt containerd runc containernetworking-plugins etcd-server curl openssl iproute2 hostname docker-registry apache2-utils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  # Another apt or dpkg (unattended-upgrades, another terminal) may hold the
  # lock: wait for it, up to APT_LOCK_TIMEOUT seconds, rather than fail.
  wait_lock=(-o "DPkg::Lock::Timeout=${APT_LOCK_TIMEOUT:-600}")
  if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial -e auxfiles)" ]; then
    apt-get "${wait_lock[@]}" update
  fi
  DEBIAN_FRONTEND=noninteractive apt-get "${wait_lock[@]}" install -y --no-install-recommends "${missing[@]}"
fi
