#!/usr/bin/env bash
# The image of deploy/Containerfile, built and smoke-tested with buildah where no image registry is
# reachable (Debian packages buildah and mmdebstrap; as root, --isolation chroot, as CI runs it):
#
#   deploy/image.sh build [WHEEL]   a Debian bookworm base made by mmdebstrap (minbase, python3 and its venv
#                                   module, no docs), ramp's wheel (WHEEL, else built from this checkout) and
#                                   its dependencies' wheels as the build context, then buildah bud
#   deploy/image.sh smoke           in one `buildah run` of the image, as its user, with no terminal:
#                                   `ramp --version`, then `ramp sim --port 0` and a headless two-step run
#                                   against it, its record on a mounted folder; the record is checked here
#   deploy/image.sh ray-smoke       (an image with the ray extra) in one `buildah run`, as its user: a Ray
#                                   head on 127.0.0.1 (`ray start --head`, its job server) and `ray job submit`
#                                   of a two-step headless `ramp run --ray` against `ramp sim`, through the Jobs
#                                   API as KubeRay's RayJob submits it; the record is checked here
#   deploy/image.sh test [WHEEL]    build, smoke (and ray-smoke when the extras hold ray), then remove the
#                                   image (.ci/run's step g, with RAMP_IMAGE_EXTRAS=ray)
#
# The base tarball is cached under ~/.cache/llm-ramp (named for what it holds, made again when missing):
# mmdebstrap is most of a cold build. RAMP_IMAGE=NAME:TAG names the image (default llm-ramp:0.1.0-ci);
# RAMP_IMAGE_EXTRAS=ray installs ramp's ray extra too (the Containerfile's EXTRAS).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
image="${RAMP_IMAGE:-localhost/llm-ramp:0.1.0-ci}"
suite=bookworm
packages=python3,python3-venv
cache="${XDG_CACHE_HOME:-$HOME/.cache}/llm-ramp"
base_tar="$cache/image-base-$suite-minbase-${packages//,/-}.tar"
base_image="localhost/llm-ramp-base:$suite"
python="${PYTHON:-python3}"
extras="${RAMP_IMAGE_EXTRAS:-}"

say() { echo "image.sh: $*" >&2; }

base() {
    if [ ! -s "$base_tar" ]; then
        mkdir -p "$cache"
        say "mmdebstrap $suite (minbase + $packages) -> $base_tar"
        # Docs, man pages and translations left out: a third of the tree, and nothing ramp reads.
        mmdebstrap --quiet --variant=minbase --include="$packages" \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
            --format=tar "$suite" "$base_tar.part"
        mv "$base_tar.part" "$base_tar"
    fi
    local ctr
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$base_tar" / >/dev/null
    buildah commit --quiet --rm "$ctr" "$base_image" >/dev/null
}

# The build context: the Containerfile and wheels/ (ramp's wheel and its dependencies', for the base's
# Python: the same minor as this machine's python3, checked).
context() {
    local ctx="$1" wheel="${2:-}"
    mkdir -p "$ctx/wheels"
    cp "$repo/deploy/Containerfile" "$ctx/"
    if [ -z "$wheel" ]; then
        "$python" -m pip wheel -q --no-deps -w "$ctx/wheels" "$repo"
    else
        cp "$wheel" "$ctx/wheels/"
    fi
    local pyver probe
    probe="$(buildah from --quiet "$base_image")"
    pyver="$(buildah run --isolation chroot "$probe" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    buildah rm "$probe" >/dev/null
    "$python" -m pip download -q --only-binary=:all: --python-version "$pyver" -d "$ctx/wheels" \
        "$(ls "$ctx"/wheels/llm_ramp-*.whl)${extras:+[$extras]}"
}

build() {
    local wheel="${1:-}" ctx rc=0
    ctx="$(mktemp -d "${TMPDIR:-/tmp}/ramp-image.XXXXXX")"
    base
    context "$ctx" "$wheel" && buildah bud --quiet --isolation chroot --layers=false \
        --build-arg BASE="$base_image" --build-arg EXTRAS="$extras" -f "$ctx/Containerfile" -t "$image" "$ctx" >/dev/null || rc=$?
    rm -rf "$ctx"
    buildah rmi "$base_image" >/dev/null  # the tarball stays cached; the image holds its own copy
    [ $rc -eq 0 ] || return $rc
    say "built $image ($(buildah images --format '{{.Size}}' "$image"))"
}

# Inside the container: the simulator on a free port (its READY line names it), a headless run of two 1 s
# steps against it with no --out and stdin not a terminal: the record goes to RAMP_RUNS_DIR, the image's
# /runs. buildah 1.28's `run` mounts an anonymous volume over the image's VOLUME even where --volume names
# the same path (podman and Kubernetes mount the caller's there), so the record is copied from /runs to the
# folder mounted at /out.
# shellcheck disable=SC2016  # expanded inside the container
inside='set -e
ramp --version
ramp sim --preset fast --speed 20 --port 0 >/tmp/sim.out 2>&1 &
sim=$!
for _ in $(seq 100); do
    url="$(sed -n "s/^READY \(http[^ ]*\).*/\1/p" /tmp/sim.out)"
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { cat /tmp/sim.out; exit 3; }
rc=0
timeout 90 ramp run "$url" --steps 1,2 --step-seconds 1 --warmup 0.5 --headless --seed 1 </dev/null || rc=$?
kill $sim
cp /runs/*.jsonl /out/
exit $rc'

smoke() {
    local out rc=0
    out="$(mktemp -d "${TMPDIR:-/tmp}/ramp-image-out.XXXXXX")"
    smoke_in "$out" || rc=$?
    rm -rf "$out"
    return $rc
}

smoke_in() {
    local out="$1" rc=0 ctr
    chown 10001:10001 "$out"  # the image's user writes there, as on a volume the Job's fsGroup owns
    ctr="$(buildah from --quiet "$image")"
    # The key comes from the environment and must reach neither the output nor the record.
    buildah run --isolation chroot --env OPENAI_API_KEY=sk-ci-not-a-real-key-0123456789 \
        --volume "$out:/out" "$ctr" -- sh -c "$inside" </dev/null >"$out/output.txt" 2>&1 || rc=$?
    buildah rm "$ctr" >/dev/null
    cat "$out/output.txt"
    # exit 0 (every step met the SLO) or 1 (one did not) are both a finished run
    [ $rc -le 1 ] || { say "the run in the image exited $rc"; return 1; }
    if grep -rq "sk-ci-not-a-real-key" "$out"; then
        say "the key was printed or saved"
        return 1
    fi
    local records=("$out"/*.jsonl)
    [ -s "${records[0]}" ] || { say "no record in /runs"; return 1; }
    [ "$(stat -c %u "${records[0]}")" = 10001 ] || { say "the record is not the image user's (10001)"; return 1; }
    "$python" - "${records[@]}" <<'PY'
import json, sys
(path,) = sys.argv[1:]
lines = [json.loads(line) for line in open(path, encoding="utf-8")]
steps = [(s["level"], s["ok"]) for s in lines if s.get("type") == "step"]
assert lines[0]["type"] == "header", lines[0]
assert len(steps) == 2 and all(ok > 0 for _level, ok in steps), f"steps (level, ok): {steps}"
print(f"image.sh: the record left in /runs: {len(steps)} steps, requests ok {[ok for _, ok in steps]}")
PY
}

# Inside the container: the simulator, then a Ray head on 127.0.0.1 only (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0:
# otherwise Ray turns 127.0.0.1 into the machine's address and listens everywhere), every port of it free
# ones, in a session of its own (setsid) that is killed at the end: `ray start --block` ignores SIGTERM, and
# `ray stop` would stop every Ray on the machine (a chroot shares the host's processes). Then `ray job
# submit` through the dashboard's Jobs API (ray[default]; minimal Ray has no job server) of a two-step
# headless run with its workers as Ray actors; the job's exit is ramp's.
# shellcheck disable=SC2016  # expanded inside the container
inside_ray='set -e
free() { python3 -c "import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])"; }
ramp sim --preset fast --speed 20 --port 0 >/tmp/sim.out 2>&1 &
sim=$!
for _ in $(seq 100); do
    url="$(sed -n "s/^READY \(http[^ ]*\).*/\1/p" /tmp/sim.out)"
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { cat /tmp/sim.out; exit 3; }
dash=$(free)
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 setsid ray start --head --block --node-ip-address 127.0.0.1 \
    --port "$(free)" --dashboard-host 127.0.0.1 --dashboard-port "$dash" \
    --dashboard-agent-listen-port "$(free)" --ray-client-server-port "$(free)" \
    --num-cpus 2 --disable-usage-stats --temp-dir /tmp/ray >/tmp/head.out 2>&1 &
head=$!
up=""
for _ in $(seq 240); do
    python3 -c "import urllib.request as u; u.urlopen(\"http://127.0.0.1:$dash/api/version\", timeout=2)" 2>/dev/null && { up=1; break; }
    kill -0 $head 2>/dev/null || break
    sleep 0.5
done
[ -n "$up" ] || { tail -30 /tmp/head.out; kill -KILL -$head 2>/dev/null; exit 3; }
rc=0
timeout 240 ray job submit --address "http://127.0.0.1:$dash" --submission-id ramp-image-smoke -- \
    ramp run "$url" --headless --ray --workers 2 --steps 1,2 --step-seconds 1.5 --warmup 0.5 --seed 1 \
    --out /runs/ray-job.jsonl </dev/null || rc=$?
kill -KILL -$head  # its whole session (dash: no "--" before a negative pid)
kill $sim
cp /runs/ray-job.jsonl /out/ 2>/dev/null || true
exit $rc'

ray_smoke() {
    local out rc=0 ctr
    out="$(mktemp -d "${TMPDIR:-/tmp}/ramp-image-ray.XXXXXX")"
    chown 10001:10001 "$out"
    ctr="$(buildah from --quiet "$image")"
    buildah run --isolation chroot --env OPENAI_API_KEY=sk-ci-not-a-real-key-0123456789 \
        --volume "$out:/out" "$ctr" -- sh -c "$inside_ray" </dev/null >"$out/output.txt" 2>&1 || rc=$?
    buildah rm "$ctr" >/dev/null
    tail -25 "$out/output.txt"
    # the job's exit is ramp's: 0 (every step met the SLO) or 1 (one did not) are both a finished run
    if [ $rc -ne 0 ] && ! grep -q "failed with exit code 1" "$out/output.txt"; then
        say "the Ray job in the image exited $rc"
        rm -rf "$out"
        return 1
    fi
    grep -rq "sk-ci-not-a-real-key" "$out" && { say "the key was printed or saved"; rm -rf "$out"; return 1; }
    "$python" - "$out/ray-job.jsonl" <<'PY' || rc=$?
import json, sys
(path,) = sys.argv[1:]
lines = [json.loads(line) for line in open(path, encoding="utf-8")]
fleet = lines[0]["fleet"]
assert fleet["kind"] == "ray" and fleet["workers"] == 2 and fleet["address"].startswith("127.0.0.1:"), fleet
steps = [(s["level"], s["ok"]) for s in lines if s.get("type") == "step"]
assert len(steps) == 2 and all(ok > 0 for _level, ok in steps), f"steps (level, ok): {steps}"
print(f"image.sh: the Ray job's record: {len(steps)} steps on {fleet['workers']} Ray actors, requests ok {[ok for _, ok in steps]}")
PY
    rm -rf "$out"
    return $rc
}

case "${1:-}" in
build) build "${2:-}" ;;
smoke) smoke ;;
ray-smoke) ray_smoke ;;
test)
    trap 'buildah rmi "$image" >/dev/null 2>&1 || true' EXIT
    build "${2:-}"
    smoke
    if [[ ",$extras," == *,ray,* ]]; then
        ray_smoke
    fi
    ;;
*)
    echo "usage: deploy/image.sh build [WHEEL] | smoke | ray-smoke | test [WHEEL]" >&2
    exit 2
    ;;
esac
