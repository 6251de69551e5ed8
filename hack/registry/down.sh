#!/usr/bin/env bash
# Stops the registry hack/registry/up.sh started under DIR, by its PID.
# DIR itself (storage, log, certificate) stays for the caller to remove.
#
#   hack/registry/down.sh DIR
set -uo pipefail
dir=${1:?usage: down.sh DIR}
[ -f "$dir/env" ] || { echo "down.sh: $dir/env missing; nothing started" >&2; exit 0; }
PID=$(sed -n 's/^PID=//p' "$dir/env")
if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
  kill -TERM "$PID"
  for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$PID" 2>/dev/null && kill -KILL "$PID"
fi
rm -f "$dir/env"
exit 0
