#!/usr/bin/env bash
# Starts a private OCI registry for the tests: Debian's docker-registry
# (distribution v2) on a free loopback port, with TLS (a self-signed P-256
# certificate for IP 127.0.0.1) and htpasswd authentication (bcrypt), its
# storage and log under DIR.
#
#   hack/registry/up.sh DIR
#
# Run again on a DIR whose registry hack/registry/down.sh stopped, it starts
# the same registry again: the same port, certificate, credentials and
# storage (a registry outage and its end, for the tests).
#
# Writes DIR/env (shell assignments, for hack/registry/down.sh and the tests):
#   PID               the registry's process
#   REGISTRY          host:port, e.g. 127.0.0.1:34567
#   REGISTRY_CA       the certificate to trust (PEM)
#   REGISTRY_CONFIG   a docker config.json holding the credentials
#   REGISTRY_USER, REGISTRY_PASSWORD
# and prints REGISTRY once /v2/ answers 401 without credentials.
# Needs docker-registry, apache2-utils (htpasswd), openssl, curl, iproute2
# (hack/install-deps.sh).
set -euo pipefail
dir=${1:?usage: up.sh DIR}
mkdir -p "$dir/data" "$dir/docker"
dir=$(cd "$dir" && pwd)
user=wasmlet

# serve PORT: runs the registry of $dir/config.yml; once /v2/ answers 401
# writes $dir/env, prints host:port and exits 0; returns 1 if it did not
# answer.
serve() {
  local port=$1 pid code
  docker-registry serve "$dir/config.yml" >>"$dir/registry.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$dir/cert.pem" "https://127.0.0.1:$port/v2/" || true)
    if [ "$code" = 401 ]; then
      auth=$(printf '%s:%s' "$user" "$password" | base64 -w0)
      printf '{"auths":{"127.0.0.1:%s":{"auth":"%s"}}}\n' "$port" "$auth" >"$dir/docker/config.json"
      chmod 600 "$dir/docker/config.json"
      {
        printf 'PID=%s\n' "$pid"
        printf 'REGISTRY=127.0.0.1:%s\n' "$port"
        printf 'REGISTRY_CA=%s\n' "$dir/cert.pem"
        printf 'REGISTRY_CONFIG=%s\n' "$dir/docker/config.json"
        printf 'REGISTRY_USER=%s\n' "$user"
        printf 'REGISTRY_PASSWORD=%s\n' "$password"
      } >"$dir/env"
      echo "127.0.0.1:$port"
      exit 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "up.sh: registry on port $port did not answer; log: $dir/registry.log" >&2
  return 1
}

if [ -f "$dir/config.yml" ] && [ -f "$dir/password" ] && [ ! -f "$dir/env" ]; then
  password=$(cat "$dir/password")
  port=$(sed -n 's/^  addr: 127.0.0.1://p' "$dir/config.yml")
  serve "$port" || { tail -n 20 "$dir/registry.log" >&2 || true; exit 1; }
fi

password=$(openssl rand -hex 16)
printf '%s\n' "$password" >"$dir/password"
chmod 600 "$dir/password"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=wasmlet-test-registry -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
htpasswd -Bbn "$user" "$password" >"$dir/htpasswd"

# A free port: one no socket listens on; if another process takes it first,
# the registry exits and the next port is tried.
used=$(ss -Htln | awk '{print $4}' | sed 's/.*://' | sort -u)
for attempt in 1 2 3 4 5; do
  port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
  grep -qx "$port" <<<"$used" && continue
  cat >"$dir/config.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  tls:
    certificate: $dir/cert.pem
    key: $dir/key.pem
auth:
  htpasswd:
    realm: wasmlet-test-registry
    path: $dir/htpasswd
YAML
  serve "$port" || true
done
echo "up.sh: no registry started" >&2
tail -n 20 "$dir/registry.log" >&2 || true
exit 1
