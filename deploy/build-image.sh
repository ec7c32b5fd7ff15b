#!/usr/bin/env bash
# Proves deploy/Containerfile on a machine that cannot pull from any registry: makes the two
# Node 20 bases from Debian trixie's packages with mmdebstrap, imports them into Podman, builds
# the image with them, runs it, and checks /healthz, the image's HEALTHCHECK, the user it runs
# as, that no dev dependency shipped, and a billed chat call and a billed tool call (the built-in
# sandbox providers) with the wallet charged exactly their price.
#
# Usage: deploy/build-image.sh [--rebuild-bases]
# Needs root (or passwordless sudo) to apt-get install podman, runc and mmdebstrap when missing.
# Where Podman cannot run here, prints "skipped: <reason>" and exits 0; any other failure exits 1.
# Takes 6-20 minutes from nothing (bases ~6 and the build ~13 on a loaded 2-vCPU machine), ~1 when cached.
set -euo pipefail

cd "$(dirname "$0")/.."
REBUILD_BASES=0
[ "${1:-}" = "--rebuild-bases" ] && REBUILD_BASES=1

IMAGE=${SVC_IMAGE:-localhost/svc:dev}
BUILD_BASE=localhost/svc-build-base:trixie
RUN_BASE=localhost/svc-run-base:trixie
SUITE=trixie
MIRROR=${SVC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=$(pwd)/.tmp/deploy-image
NAME=svc-image-smoke-$$
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# crun fails here ("cgroups in hybrid mode not supported"); runc works.
RUNTIME=(--runtime runc)
# Raising the hard limits is not permitted here; these fit under them.
ULIMITS=(--ulimit nofile=20000:20000 --ulimit nproc=4096:4096)

started=$(date +%s)
say() { printf '==> [+%ss] %s\n' "$(($(date +%s) - started))" "$*"; }
skip() { printf 'skipped: %s\n' "$*"; exit 0; }
die() { printf 'build-image FAILED: %s\n' "$*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif sudo -n true 2>/dev/null; then sudo -n "$@"; else return 1; fi; }

[ "$(uname -s)" = Linux ] || skip "Podman images are built on Linux; this is $(uname -s)"

ensure_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  [ ${#missing[@]} -eq 0 ] && return
  command -v apt-get >/dev/null || skip "${missing[*]} missing and there is no apt-get to install them"
  as_root true || skip "${missing[*]} missing and installing them needs root or passwordless sudo"
  say "apt-get install ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
    || skip "apt-get update failed (no Debian mirror reachable?)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" uidmap slirp4netns fuse-overlayfs >/dev/null \
    || skip "apt-get install ${missing[*]} failed"
}
ensure_tools
podman_() { as_root podman "$@"; }
out=$(podman_ "${RUNTIME[@]}" info --format '{{.Host.OCIRuntime.Name}} {{.Version.Version}}' 2>&1) \
  || skip "podman info fails here: $(printf '%s' "$out" | tail -n 1)"
say "podman $out"

# A base image from Debian's packages: mmdebstrap writes the root filesystem as a tarball, which
# podman imports. Kept between runs unless --rebuild-bases.
make_base() {
  local image=$1 packages=$2
  shift 2
  if [ $REBUILD_BASES -eq 0 ] && podman_ image exists "$image"; then
    say "base $image exists (--rebuild-bases to make it again)"
    return
  fi
  mkdir -p "$WORK"
  say "mmdebstrap $SUITE with $packages -> $image"
  as_root mmdebstrap --quiet --variant=apt --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='chroot "$1" apt-get clean' --customize-hook='rm -rf "$1"/var/lib/apt/lists/*' \
    "$SUITE" "$WORK/base.tar" "$MIRROR" || die "mmdebstrap $SUITE failed (mirror $MIRROR)"
  podman_ import "$@" "$WORK/base.tar" "$image" >/dev/null
  rm -f "$WORK/base.tar"
}
# The build base has what npm ci needs for better-sqlite3's native module against Debian's Node
# (libnode-dev's headers, npm_config_nodedir=/usr); the run base only node and the CA store.
make_base "$BUILD_BASE" nodejs,npm,g++,make,python3,libnode-dev,ca-certificates \
  --change 'ENV npm_config_nodedir=/usr' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
make_base "$RUN_BASE" nodejs,ca-certificates \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
for base in "$BUILD_BASE" "$RUN_BASE"; do
  say "base $base: $(podman_ image inspect --format '{{.Digest}} {{.Id}}' "$base") node $(podman_ run "${RUNTIME[@]}" "${ULIMITS[@]}" --rm --network none "$base" node --version)"
done

# --format docker keeps HEALTHCHECK (OCI images have no such field). The host's CA bundle is a
# build-time volume: npm reaches the registry through it, and no layer keeps it.
build_args=(--format docker "${RUNTIME[@]}" "${ULIMITS[@]}" -f deploy/Containerfile -t "$IMAGE"
  --build-arg "BUILD_BASE=$BUILD_BASE" --build-arg "RUN_BASE=$RUN_BASE")
[ -r "$CA_BUNDLE" ] && build_args+=(-v "$CA_BUNDLE:$CA_BUNDLE:ro")
say "podman build ${build_args[*]} ."
podman_ build "${build_args[@]}" . || die "podman build failed"
say "image $IMAGE: $(podman_ image inspect --format '{{.Id}} {{.Size}} bytes' "$IMAGE")"

cleanup() { podman_ rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# Nothing secret in the image: no CA bundle from the build, no npm credentials.
podman_ run "${RUNTIME[@]}" "${ULIMITS[@]}" --rm --network none --entrypoint sh "$IMAGE" -c \
  'test ! -e /root/.npmrc && test ! -e /app/.npmrc' || die "an .npmrc is in the image"
# Production dependencies only: the compiler and the test runner did not ship.
if podman_ run "${RUNTIME[@]}" "${ULIMITS[@]}" --rm --network none --entrypoint node "$IMAGE" \
  -e "require.resolve('typescript')" >/dev/null 2>&1; then die "typescript (a dev dependency) is in the image"; fi
podman_ run "${RUNTIME[@]}" "${ULIMITS[@]}" --rm --network none --entrypoint node "$IMAGE" \
  -e "require('better-sqlite3')(':memory:').prepare('select 1 as one').get()" \
  || die "better-sqlite3's native module does not load in the image"

port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
say "podman run $IMAGE (svc serve, sandbox providers) on 127.0.0.1:$port"
# No systemd here to time the HEALTHCHECK: it is run by hand below (podman healthcheck run).
podman_ run -d "${RUNTIME[@]}" "${ULIMITS[@]}" --health-interval disable --name "$NAME" \
  -p "127.0.0.1:$port:8080" "$IMAGE" >/dev/null
base=http://127.0.0.1:$port
for _ in $(seq 1 60); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  if [ "$(podman_ inspect --format '{{.State.Running}}' "$NAME")" != true ]; then
    podman_ logs "$NAME" | tail -n 20 >&2
    die "the container exited"
  fi
  sleep 1
done
say "GET /healthz: $(curl -fsS "$base/healthz")"
say "GET /readyz: $(curl -fsS "$base/readyz")"
user=$(podman_ exec "$NAME" node -e 'process.stdout.write(String(process.getuid()))')
[ "$user" = 10001 ] || die "the container runs as uid $user, not 10001"
say "runs as uid $user"
podman_ healthcheck run "$NAME" >/dev/null || die "the image's HEALTHCHECK fails on a running svc serve"
say "HEALTHCHECK: healthy"

svc() { podman_ exec "$NAME" node /app/bin/svc.js "$@"; }
json_field() { node -e "process.stdout.write(String(JSON.parse(require('fs').readFileSync(0,'utf8'))[process.argv[1]]))" "$1"; }
account=$(svc account create --name image-smoke --json | json_field id)
key=$(svc key create --account "$account" --name smoke --json | json_field key)
svc wallet topup --account "$account" --amount 100000 --reference image-smoke --json >/dev/null
balance() { svc wallet show --account "$account" --json | json_field balance; }
before=$(balance)

chat=$(curl -fsS "$base/v1/openai/chat/completions" -H "authorization: Bearer $key" \
  -H 'content-type: application/json' \
  -d '{"model":"svc-pro","messages":[{"role":"user","content":"Salam from the image"}]}')
printf '%s' "$chat" | node -e "const b=JSON.parse(require('fs').readFileSync(0,'utf8')); if(!b.choices?.[0]?.message?.content||!b.usage) process.exit(1)" \
  || die "the chat answer is not a completion: $chat"
after_chat=$(balance)
cost=$(printf '%s' "$chat" | node -e "process.stdout.write(String(JSON.parse(require('fs').readFileSync(0,'utf8')).usage.cost))")
say "chat completion: $(printf '%s' "$chat" | node -e "const b=JSON.parse(require('fs').readFileSync(0,'utf8')); process.stdout.write(JSON.stringify({model:b.model,usage:b.usage}))"), charged $((before - after_chat)) credits"
[ $((before - after_chat)) -gt 0 ] || die "the chat call was not charged"
[ $((before - after_chat)) -eq "$cost" ] || die "the chat call was charged $((before - after_chat)), its usage says $cost"

tool=$(curl -fsS "$base/v1/mcp" -H "authorization: Bearer $key" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"maps_search_places","arguments":{"query":"coffee"}}}')
printf '%s' "$tool" | node -e "const b=JSON.parse(require('fs').readFileSync(0,'utf8')); if(!b.result||b.result.isError) process.exit(1)" \
  || die "the tool call did not succeed: $tool"
after_tool=$(balance)
say "tool call maps_search_places: charged $((after_chat - after_tool)) credits"
[ $((after_chat - after_tool)) -eq 460 ] || die "the tool call was charged $((after_chat - after_tool)), not its price 460"
ledger=$(svc wallet ledger --account "$account" --json | node -e "const b=JSON.parse(require('fs').readFileSync(0,'utf8')); process.stdout.write(String(b.entries.filter(e=>e.kind==='charge').length))")
[ "$ledger" = 2 ] || die "the ledger has $ledger charges, not 2"
say "ledger: 1 top-up, 2 charges; balance $after_tool of 100000"

podman_ stop -t 15 "$NAME" >/dev/null
code=$(podman_ inspect --format '{{.State.ExitCode}}' "$NAME")
[ "$code" = 0 ] || die "svc exited $code on SIGTERM (podman stop), not 0"
say "podman stop: drained and exited 0"
say "image proven: $IMAGE"
