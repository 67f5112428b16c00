"""Do a real vLLM's answers stay the same under load? The answer probes' agreement with level 1's answers at
1, 8 and 32 streams, with and without prefix caching (issue 34's real finding).

Run (the venv and the model from ``scripts/ci_vllm.sh``)::

    eval "$(bash scripts/ci_vllm.sh | sed 's/^/export /')"
    python benchmarks/bench_vllm_quality.py [--levels 1,8,32] [--step-seconds 25] [--share 0.5] [--probes 24] [--repeats 1]
        [--caching on,off] [--out-dir DIR]

Each configuration is one ``ramp launch vllm MODEL --python $RAMP_VLLM_PYTHON --headless --quality
--steps 1,8,32 ... -- --max-model-len 2048 --enforce-eager --(no-)enable-prefix-caching`` (the server started
fresh; greedy probes, a ``[quality]`` table of ``--probes`` prompts, ``--share`` of the requests, mixed into
a 64-in / 48-out chat load): level 1 (one stream, no batching) sets each probe's reference answer, and every
later step compares its probes with it. Level 1 must be long enough to answer every prompt once (the
``unreferenced`` column says how many later probes had no reference); more prompts narrow the interval. Prints one row per step:
agreement (exact match with the reference) with its 95 % interval, probes compared, the median common
prefix in characters, and the step's output tok/s. Asserts nothing; the table goes to docs/numbers.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen.record import read_record  # noqa: E402 - after the path, for a checkout without install

PROFILE = """
name = "vllm-quality"
[target]
api = "chat"
model = "auto"
[[bucket]]
input = 64
output = 48
[sampling]
temperature = 0.0
ignore_eos = true
[quality]
share = {share}
probes = {probes}
"""
# What a CPU vLLM needs here (as tests/e2e/test_vllm_real.py gives it).
VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}
CACHING = {"on": "--enable-prefix-caching", "off": "--no-enable-prefix-caching"}


def command(
    python: str, model: str, profile: Path, out: Path, args: argparse.Namespace, caching: str
) -> list[str]:
    return [
        sys.executable, "-c", "import sys; from loadgen.cli import main; sys.exit(main())",
        "launch", "vllm", model, "--python", python, "--headless", "--profile", str(profile), "--quality",
        "--steps", args.levels, "--step-seconds", str(args.step_seconds), "--warmup", str(args.warmup),
        "--out", str(out), "--health-timeout", "300",
        "--", "--max-model-len", "2048", "--enforce-eager", CACHING[caching], *shlex.split(args.server_args),
    ]  # fmt: skip


def rows(path: Path) -> list[tuple[int, dict[str, object], float, object]]:
    """Per step: level, quality, output tok/s, the server's prefix-cache hit rate."""
    return [
        (
            int(s["level"]),
            dict(s.get("quality") or {}),
            float(s.get("out_tok_s") or 0.0),
            (s.get("server") or {}).get("prefix_cache_hit_rate"),
        )
        for s in read_record(path).steps
    ]


def reference(path: Path) -> dict[str, str]:
    """The reference answers level 1 set (by probe index)."""
    for s in read_record(path).steps:
        ref = (s.get("quality") or {}).get("reference")
        if isinstance(ref, dict):
            return {str(k): str(v) for k, v in ref.items()}
    return {}


def fmt(q: dict[str, object]) -> str:
    agree, lo, hi = q.get("agree"), q.get("agree_lo"), q.get("agree_hi")
    if not isinstance(agree, (int, float)):
        return "n/a"
    return (
        f"{agree:.2f} ({lo:.2f}–{hi:.2f})"
        if isinstance(lo, float) and isinstance(hi, float)
        else f"{agree:.2f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--step-seconds", type=float, default=25.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--caching", default="on,off")
    ap.add_argument("--share", type=float, default=0.5, help="[quality] share: of the load's requests")
    ap.add_argument("--probes", type=int, default=24, help="[quality] probes: prompts level 1 must answer")
    ap.add_argument("--server-args", default="", help="more vLLM flags, e.g. '--block-size 16'")
    ap.add_argument("--out-dir", default="")
    args = ap.parse_args()
    python, model = os.environ.get("RAMP_VLLM_PYTHON", ""), os.environ.get("RAMP_VLLM_MODEL", "")
    if not (python and model):
        print("set RAMP_VLLM_PYTHON and RAMP_VLLM_MODEL (scripts/ci_vllm.sh prints them)", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="bench_vllm_quality_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    profile = out_dir / "profile.toml"
    profile.write_text(PROFILE.format(share=args.share, probes=args.probes))
    table: list[str] = []
    references: dict[str, dict[str, str]] = {}
    for rep in range(args.repeats):
        for caching in args.caching.split(","):
            out = out_dir / f"quality-{caching}-{rep}.jsonl"
            cmd = command(python, model, profile, out, args, caching)
            print("$", " ".join(cmd[3:]), file=sys.stderr, flush=True)
            t0 = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **VLLM_ENV))
            if proc.returncode not in (0, 1) or not out.exists():
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            print(f"  {time.monotonic() - t0:.0f} s, record {out}", file=sys.stderr, flush=True)
            references[f"{caching} run {rep + 1}"] = reference(out)
            for level, q, tok_s, hits in rows(out):
                hit = f"{hits:.2f}" if isinstance(hits, float) else "n/a"
                table.append(
                    f"| {caching} | {rep + 1} | {level} | {fmt(q)} | {q.get('n', 0)} | "
                    f"{q.get('prefix_chars_p50', 'n/a')} | {q.get('unreferenced', 0)} | {hit} | {tok_s:,.0f} |"
                )
    print(
        "| prefix caching | run | streams | agreement (95 %) | probes | prefix chars p50 | unreferenced "
        "| server cache hit rate | out tok/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    # Level 1 against level 1 across servers: the same greedy answers from each fresh start and setting?
    (first, ref), *others = references.items()
    for name, other in others:
        same = sum(1 for k, text in ref.items() if other.get(k) == text)
        print(f"level-1 answers of {name} equal to {first}'s: {same} of {len(ref)} prompts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
