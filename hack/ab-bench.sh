#!/usr/bin/env bash
# Benchmarks of this tree beside the same benchmarks of a baseline, in one
# run: each benchmark is compiled in both trees (`go test -c`), then the two
# binaries run alternately ROUNDS times (base, this, this, base, …), so a
# machine whose load drifts weighs on both alike. Prints every benchmark
# line prefixed with its tree, then per benchmark and unit the median of
# each tree and this/base.
#
#   BASE=<rev> hack/ab-bench.sh MODULE:PKG:REGEX ...
#   BASE=main hack/ab-bench.sh .:./host/agent:StaticPodsToRunning sdk:.:DecodePod
#
# MODULE is the module's directory (".", "sdk", …), PKG a package in it,
# REGEX the -test.bench pattern. BASE (default main) is checked out into a
# temporary worktree; BASE_DIR=<dir> uses an existing checkout instead.
# ROUNDS (default 5), BENCHTIME (default 1s). A heavy job: run nothing
# else heavy beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rounds=${ROUNDS:-5}
benchtime=${BENCHTIME:-1s}
[ $# -gt 0 ] || { sed -n '2,16p' "$0" >&2; exit 2; }

work=$(mktemp -d /tmp/ab-bench.XXXX)
made_worktree=
cleanup() {
  if [ -n "$made_worktree" ]; then git worktree remove --force "$made_worktree" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${BASE_DIR:-}" ]; then
  base_dir=$BASE_DIR
else
  base_dir=$work/base
  git worktree add --detach "$base_dir" "${BASE:-main}" >/dev/null
  made_worktree=$base_dir
fi
echo "ab-bench: base $(git -C "$base_dir" rev-parse --short HEAD), this $(git rev-parse --short HEAD)$([ -n "$(git status --porcelain)" ] && echo ' (modified)'), $rounds rounds, benchtime $benchtime"

n=0
for spec in "$@"; do
  IFS=: read -r mod pkg re <<<"$spec"
  n=$((n + 1))
  for tree in base this; do
    dir=$root
    [ "$tree" = base ] && dir=$base_dir
    (cd "$dir/$mod" && go test -c -o "$work/$tree.$n.test" "$pkg")
  done
  echo "$mod $pkg" >"$work/pkg.$n"
done

out=$work/out
: >"$out"
for r in $(seq "$rounds"); do
  order="base this"
  [ $((r % 2)) -eq 0 ] && order="this base"
  for i in $(seq "$n"); do
    IFS=: read -r mod pkg re <<<"${!i}"
    read -r _ pkgpath <"$work/pkg.$i"
    for tree in $order; do
      dir=$root
      [ "$tree" = base ] && dir=$base_dir
      # A test binary runs in its package's directory, as go test runs it.
      (cd "$dir/$mod/$pkgpath" && "$work/$tree.$i.test" -test.run '^$' -test.bench "$re" -test.benchmem -test.benchtime "$benchtime") |
        grep '^Benchmark' | sed "s/^/$tree /" | tee -a "$out"
    done
  done
done

echo "== medians (this/base)"
awk '
{ tree = $1; name = $2
  for (i = 4; i < NF; i += 2) { key = name " " $(i + 1); v[tree, key, ++c[tree, key]] = $i; keys[key] = 1 } }
function median(tree, key,   k, j, x, a, m) {
  m = c[tree, key]; if (m == 0) return ""
  for (k = 1; k <= m; k++) {   # insertion sort: POSIX awk has no asort
    x = v[tree, key, k] + 0
    for (j = k - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]
    a[j + 1] = x }
  return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
END { for (key in keys) { b = median("base", key); t = median("this", key)
  printf "%-70s base %14s  this %14s  %s\n", key, b, t, (b > 0 ? sprintf("%.2fx", t / b) : "-") } }
' "$out" | sort
