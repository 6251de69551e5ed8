# shellcheck shell=bash
# kubelet_config NAME=VALUE...: the real kubelet's KubeletConfiguration as
# hack/ runs it, from the template hack/kubeletconfig/kubelet.yaml (which
# hack/benchnode renders through package kubeletconfig by the same rules):
# each ${NAME} is replaced by its VALUE; a line with a ${NAME} given no
# value, and the template's comment lines, are left out. A NAME the
# template lacks is an error.
kubelet_config_template=$(cd "$(dirname "${BASH_SOURCE[0]}")/../kubeletconfig" && pwd)/kubelet.yaml
kubelet_config() {
  local -A value=() used=()
  local kv line name out=
  for kv in "$@"; do value[${kv%%=*}]=${kv#*=}; done
  while IFS= read -r line || [ -n "$line" ]; do
    [[ $line == \#* ]] && continue
    local rest=$line skip=
    while [[ $rest =~ \$\{([A-Za-z]+)\} ]]; do
      name=${BASH_REMATCH[1]}
      used[$name]=1
      [ -n "${value[$name]:-}" ] || skip=1
      rest=${rest#*"${BASH_REMATCH[0]}"}
    done
    [ -n "$skip" ] && continue
    for name in "${!value[@]}"; do line=${line//"\${$name}"/"${value[$name]}"}; done
    out+=$line$'\n'
  done <"$kubelet_config_template"
  for name in "${!value[@]}"; do
    [ -n "${used[$name]:-}" ] || { echo "kubelet_config: the template has no \${$name}" >&2; return 1; }
  done
  printf '%s' "$out"
}
