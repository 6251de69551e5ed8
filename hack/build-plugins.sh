#!/usr/bin/env bash
# Builds wasmlet plugins into OUTDIR.
#
#   hack/build-plugins.sh OUTDIR [PLUGIN_DIR...]
#
# A plugin directory holds a manifest template plugin.yaml (no sha256) and
# either a Go main package (built with GOOS=wasip1 GOARCH=wasm
# -buildmode=c-shared -trimpath) or C sources (clang-14 --target=wasm32-wasi
# with Debian's wasi-libc, reactor model). Each plugin NAME (from its
# manifest) becomes OUTDIR/NAME.wasm and OUTDIR/NAME.plugin.yaml, the template
# with wasm and sha256 filled in. Without PLUGIN_DIRs it builds every
# directory under plugins/ and examples/plugins/ that has a plugin.yaml, and
# also the example workload examples/workloads/testbox for wasip1 into
# OUTDIR/../workloads/testbox.wasm.
#
# A Go plugin builds in the module that holds its directory (plugins/ and
# examples/plugins/ are modules of their own, requiring only this tree's abi,
# sdk and sdk/sdktest through replace directives); the testbox workload builds
# in the root module. GOWORK=off keeps a go.work above the tree from
# building them against anything else.
#
# Incremental: go build leaves an up-to-date module alone, C modules are
# rebuilt only when a source is newer, and a manifest is rewritten only when
# its content changes (a running agent's plugin directory watcher sees no
# change when nothing changed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [PLUGIN_DIR...]" >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)

GO=${GO:-go}
export GOWORK=off
CC_WASM=${CC_WASM:-clang-14}

all=0
if [ $# -eq 0 ]; then
  all=1
  set --
  for m in plugins/*/plugin.yaml examples/plugins/*/plugin.yaml; do
    [ -f "$m" ] && set -- "$@" "$(dirname "$m")"
  done
fi

# write_if_changed FILE: stdin to FILE, only when different.
write_if_changed() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat >"$tmp"
  chmod 644 "$tmp"
  if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

for dir in "$@"; do
  dir=${dir%/}
  [ -d "$dir" ] || dir=$root/$dir
  manifest=$dir/plugin.yaml
  [ -f "$manifest" ] || { echo "build-plugins: $dir: no plugin.yaml" >&2; exit 1; }
  name=$(sed -n 's/^name:[[:space:]]*\([a-z0-9-]*\).*/\1/p' "$manifest" | head -n1)
  [ -n "$name" ] || { echo "build-plugins: $manifest: no name" >&2; exit 1; }
  if grep -qE '^(sha256|wasm):' "$manifest"; then
    echo "build-plugins: $manifest: a template must not set sha256 or wasm (the build fills them in)" >&2
    exit 1
  fi
  wasm=$out/$name.wasm
  if compgen -G "$dir/*.go" >/dev/null; then
    (cd "$dir" && GOOS=wasip1 GOARCH=wasm "$GO" build -buildmode=c-shared -trimpath -o "$wasm" .) \
      || { echo "build-plugins: $dir: go build failed" >&2; exit 1; }
  elif compgen -G "$dir/*.c" >/dev/null; then
    stale=1
    if [ -f "$wasm" ]; then
      stale=0
      for src in "$dir"/*.c "$dir"/*.h; do
        [ -e "$src" ] && [ "$src" -nt "$wasm" ] && stale=1
      done
    fi
    if [ $stale = 1 ]; then
      "$CC_WASM" --target=wasm32-wasi --sysroot=/usr -O2 -Wall -Wextra -Werror -mexec-model=reactor \
        -Wl,--strip-debug -o "$wasm.tmp" "$dir"/*.c \
        || { echo "build-plugins: $dir: clang failed" >&2; exit 1; }
      mv -f "$wasm.tmp" "$wasm"
    fi
  else
    echo "build-plugins: $dir: neither Go nor C sources" >&2
    exit 1
  fi
  sum=$(sha256sum "$wasm" | cut -d' ' -f1)
  { cat "$manifest"; printf 'wasm: %s.wasm\nsha256: %s\n' "$name" "$sum"; } | write_if_changed "$out/$name.plugin.yaml"
  echo "build-plugins: $name -> $wasm"
done

if [ $all = 1 ] && [ -d examples/workloads/testbox ]; then
  mkdir -p "$out/../workloads"
  GOOS=wasip1 GOARCH=wasm "$GO" build -trimpath -o "$out/../workloads/testbox.wasm" ./examples/workloads/testbox
  echo "build-plugins: testbox -> $(cd "$out/../workloads" && pwd)/testbox.wasm"
fi
