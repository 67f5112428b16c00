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
#   deploy/image.sh test [WHEEL]    build, smoke, then remove the image (.ci/run's step g)
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

case "${1:-}" in
build) build "${2:-}" ;;
smoke) smoke ;;
test)
    trap 'buildah rmi "$image" >/dev/null 2>&1 || true' EXIT
    build "${2:-}"
    smoke
    ;;
*)
    echo "usage: deploy/image.sh build [WHEEL] | smoke | test [WHEEL]" >&2
    exit 2
    ;;
esac
