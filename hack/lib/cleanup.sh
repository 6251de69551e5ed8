# shellcheck shell=bash
# What the test and benchmark scripts' traps share: ending the processes a
# killed run left behind, and the mounts under its state directory.

# kill_matching PATTERN: SIGKILL to every process whose command line (its
# arguments joined by spaces) matches the extended regular expression.
kill_matching() {
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qE -- "$1"; then
      kill -KILL "${p#/proc/}" 2>/dev/null
    fi
  done
}

# umount_under DIR: lazily unmounts every mount point below DIR, deepest
# first.
umount_under() {
  awk -v b="$1/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
}
