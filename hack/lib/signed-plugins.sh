# shellcheck shell=bash
# What the plugin figure scripts share: a private registry holding plugins
# signed with a cosign key, and the node policy that requires the signature.
# Run from the repository's root.

# signed_registry WORK: starts the registry under WORK/registry
# (hack/registry/up.sh: Debian's docker-registry, TLS, htpasswd) and exports
# its REGISTRY, REGISTRY_CONFIG and REGISTRY_CA; makes the key pair
# WORK/cosign.key, WORK/cosign.pub (password "figures") and the node policy
# WORK/policy.yaml requiring a signature by it. The caller's trap stops the
# registry (hack/registry/down.sh WORK/registry).
signed_registry() {
  local work=$1 cosign
  cosign=$(hack/cosign/build.sh)
  hack/registry/up.sh "$work/registry" >/dev/null
  # shellcheck disable=SC1091
  . "$work/registry/env"
  export REGISTRY REGISTRY_CONFIG REGISTRY_CA
  COSIGN_PASSWORD=figures HOME=$work "$cosign" generate-key-pair --output-key-prefix "$work/cosign" >/dev/null 2>&1
  cat >"$work/policy.yaml" <<YAML
apiVersion: wasmlet.dev/v1alpha1
kind: PluginVerificationPolicy
requireSignature: true
verification:
  keys: [$work/cosign.pub]
YAML
}

# push_signed WASMLET WORK SRC REF: pushes the plugin directory SRC (a
# manifest and its module) to REF (REGISTRY/REPOSITORY:TAG) with the
# WASMLET binary, signs the pushed digest with WORK/cosign.key, and prints
# the digest.
push_signed() {
  local wasmlet=$1 work=$2 src=$3 ref=$4 digest
  digest=$("$wasmlet" plugin push --registry-config "$REGISTRY_CONFIG" --registry-ca "$REGISTRY_CA" "$src" "$ref" |
    sed -n 's/.*@\(sha256:[0-9a-f]*\).*/\1/p')
  [ -n "$digest" ] || { echo "push_signed: wasmlet plugin push printed no digest for $ref" >&2; return 1; }
  COSIGN_PASSWORD=figures HOME=$work "$wasmlet" plugin sign --key "$work/cosign.key" \
    --registry-config "$REGISTRY_CONFIG" --registry-ca "$REGISTRY_CA" "${ref%:*}@$digest" >/dev/null
  echo "$digest"
}

# reference_manifest MANIFEST REF: prints the reference manifest a node
# uses for the plugin of MANIFEST pushed to REF: the node's settings of the
# directory manifest (its permissions as the grant), the image in place of
# the module.
reference_manifest() {
  python3 - "$1" "$2" <<'PY'
import sys, yaml
m = yaml.safe_load(open(sys.argv[1]))
for k in ("abi", "kinds", "version", "sha256", "wasm"):
    m.pop(k, None)
m["image"] = sys.argv[2]
print(yaml.safe_dump(m))
PY
}
