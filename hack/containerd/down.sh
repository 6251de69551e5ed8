#!/usr/bin/env bash
# Tears down what hack/containerd/up.sh started, leaving the machine clean
# even after a failed test: removes every pod through CRI, stops containerd by
# its PID, deletes leftover runc containers and their shims, lazily unmounts
# whatever is still mounted under BASE, deletes the CNI bridge and BASE.
#
#   hack/containerd/down.sh BASE [CRI-TOOL]
#
# CRI-TOOL is the hack/containerd/cri binary (skipped when absent).
# With KEEP_BASE=1 the directory (logs) is kept, only the mounts go.
set -uo pipefail
base=${1:?usage: down.sh BASE [CRI-TOOL]}
cri=${2:-}
[ -f "$base/env" ] || { echo "down.sh: $base/env missing; nothing started" >&2; exit 0; }
. "$base/env"
sock="$base/c.sock"
if kill -0 "$PID" 2>/dev/null && [ -n "$cri" ] && [ -x "$cri" ]; then
  "$cri" -e "unix://$sock" -timeout 90s rmall || echo "down.sh: CRI cleanup failed; forcing" >&2
fi
if kill -0 "$PID" 2>/dev/null; then
  kill -TERM "$PID"
  for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$PID" 2>/dev/null && kill -KILL "$PID"
fi
# Containers the CRI could not remove: runc's state is under BASE/runc.
for root in "$base"/runc/*; do
  [ -d "$root" ] || continue
  for id in $(runc --root "$root" list -q 2>/dev/null); do
    runc --root "$root" delete -f "$id" >/dev/null 2>&1 || true
  done
done
# Shims of this containerd (their command line names its socket).
for p in /proc/[0-9]*; do
  if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "-address $sock "; then
    kill -KILL "${p#/proc/}" 2>/dev/null || true
  fi
done
# Mounts under BASE, deepest first.
awk -v b="$base/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
  umount -l "$m" 2>/dev/null || true
done
ip link delete "$BRIDGE" >/dev/null 2>&1 || true
if [ "${KEEP_BASE:-0}" != 1 ]; then
  rm -rf --one-file-system "$base"
else
  rm -f "$base/env"
fi
