"""The same step measured by three clients: ramp, ``vllm bench serve`` and SGLang's ``bench_serving``.

Run: ``python benchmarks/bench_parity.py [--streams 64] [--output 128] [--seconds 20]
[--vllm /root/.cache/llm-ramp/vllm-venv/bin/python] [--sglang /work/venvs/sglang/bin/python]
[--tokenizer DIR]``. Prints a table; asserts nothing; not part of CI. A client whose interpreter is missing
is left out with the reason. Offline: 127.0.0.1 only, the tokenizer a local folder.

One simulator (``ramp sim``'s fast preset: a true TTFT of 50 ms and 10 ms a token whatever the load, so
the truth is known) pinned to CPU 0; each client in turn pinned to CPU 1 (its whole process tree), the
same step for each: ``--streams`` concurrent streams, closed loop, 32-token prompts, ``--output`` tokens
with ignore_eos, about ``--seconds`` long. ramp: ``ramp run --steps S --step-seconds T --warmup 3``
(its figures exclude the warm-up); the other two: ``--max-concurrency S`` over as many prompts as fill
about T seconds, random token ids (``random`` / ``random-ids``: no data set to download).

Per client: output tok/s, TTFT p50 / p99, ITL p50 / p99 (each tool's own figures), and CPU seconds per 1M
tokens: the client's process tree's user + system time (``os.wait4``: its reaped children included, so
ramp's workers count) over the tokens the simulator generated while it ran (its ``/metrics`` counter,
read before and after). Startup (interpreter, imports, a tokenizer: seconds of CPU for the other two) is
part of a run's CPU; ``excl. start`` is the marginal cost instead: each client also runs a short step
first (one round of ``--streams`` requests; ramp a 4-s step), and (CPU - its CPU) / (tokens - its
tokens) is what another 1M tokens cost.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.record import read_record  # noqa: E402 - after the path, for a checkout without install
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402

MODEL = "sim-llama-8b"  # what the simulator serves; the other tools take it as --served-model-name
INPUT = 32
TTFT_MS, TPOT_MS = 50.0, 10.0  # the fast preset's truth
CACHE = Path("/root/.cache/llm-ramp")
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}
TOKENS = re.compile(rb"^vllm:generation_tokens_total(?:\{[^}]*\})?\s+([0-9.eE+]+)", re.M)


@dataclass
class Run:
    tok_s: float | None
    ttft: tuple[float | None, float | None]
    itl: tuple[float | None, float | None]
    cpu_s: float
    tokens: int
    wall_s: float


def generated(url: str) -> int:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        match = TOKENS.search(resp.read())
    return int(float(match.group(1))) if match else 0


def _pin_cpu1() -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})


def timed(cmd: list[str], url: str, env: dict[str, str], timeout: float) -> tuple[float, int, float, str]:
    """Run ``cmd`` on CPU 1; its process tree's CPU seconds, the tokens generated meanwhile, wall, output."""
    before = generated(url)
    log = tempfile.TemporaryFile()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_pin_cpu1)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)  # polling a child for a benchmark, not synchronising a test
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    log.seek(0)
    text = log.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}: {text[-1500:]}")
    return usage.ru_utime + usage.ru_stime, generated(url) - before, wall, text


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def run_of(got: dict[str, Any], cpu: float, tokens: int, wall: float) -> Run:
    """A run from its figures under the keys of the result JSON that ``vllm bench serve`` and SGLang's
    ``bench_serving`` both write."""
    return Run(
        _num(got.get("output_throughput")),
        (_num(got.get("median_ttft_ms")), _num(got.get("p99_ttft_ms"))),
        (_num(got.get("median_itl_ms")), _num(got.get("p99_itl_ms"))),
        cpu,
        tokens,
        wall,
    )


def run_ramp(url: str, args: argparse.Namespace, tmp: Path, seconds: float) -> Run:
    profile = tmp / "parity.toml"
    profile.write_text(
        f'name = "parity"\n[target]\napi = "chat"\nmodel = "{MODEL}"\n[[bucket]]\ninput = {INPUT}\n'
        f"output = {args.output}\n[sampling]\nignore_eos = true\n"
    )
    out = tmp / f"ramp-{seconds:g}.jsonl"
    cmd = [sys.executable, "-m", "loadgen.cli", "run", url, "--headless", "--profile", str(profile)]
    cmd += [
        "--steps",
        str(args.streams),
        "--step-seconds",
        f"{seconds:g}",
        "--warmup",
        "3",
        "--out",
        str(out),
    ]
    env = dict(os.environ, RAMP_WORKER_CPUS="1", PYTHONPATH=str(ROOT))
    cpu, tokens, wall, _ = timed(cmd, url, env, seconds + 120)
    (step,) = read_record(out).steps
    pct = step.get("pct") or {}
    ttft, itl = pct.get("ttft_ms") or {}, pct.get("itl_ms") or {}
    got = {
        "output_throughput": step.get("out_tok_s"),
        "median_ttft_ms": ttft.get("p50"),
        "p99_ttft_ms": ttft.get("p99"),
        "median_itl_ms": itl.get("p50"),
        "p99_itl_ms": itl.get("p99"),
    }  # the step line's figures under the other two tools' keys
    return run_of(got, cpu, tokens, wall)


def run_vllm(url: str, args: argparse.Namespace, tmp: Path, prompts: int) -> Run:
    vllm = str(Path(args.vllm).with_name("vllm"))
    cmd = [vllm, "bench", "serve", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]
    cmd += ["--base-url", url, "--model", args.tokenizer, "--tokenizer", args.tokenizer]
    cmd += ["--served-model-name", MODEL, "--dataset-name", "random", "--random-input-len", str(INPUT)]
    cmd += ["--random-output-len", str(args.output), "--ignore-eos", "--num-prompts", str(prompts)]
    cmd += ["--max-concurrency", str(args.streams), "--seed", "1", "--disable-tqdm"]
    cmd += ["--percentile-metrics", "ttft,itl", "--metric-percentiles", "50,99"]
    cmd += ["--save-result", "--result-dir", str(tmp), "--result-filename", f"vllm-{prompts}.json"]
    cpu, tokens, wall, _ = timed(cmd, url, dict(os.environ, **OFFLINE), 600)
    got = json.loads((tmp / f"vllm-{prompts}.json").read_text())
    return run_of(got, cpu, tokens, wall)


def run_sglang(url: str, args: argparse.Namespace, tmp: Path, prompts: int) -> Run:
    out = tmp / f"sglang-{prompts}.jsonl"
    cmd = [args.sglang, "-m", "sglang.bench_serving", "--backend", "vllm-chat", "--base-url", url]
    cmd += ["--model", args.tokenizer, "--tokenizer", args.tokenizer, "--served-model-name", MODEL]
    cmd += ["--dataset-name", "random-ids", "--random-input-len", str(INPUT), "--random-range-ratio", "1"]
    cmd += ["--random-output-len", str(args.output), "--num-prompts", str(prompts), "--seed", "1"]
    cmd += ["--max-concurrency", str(args.streams), "--disable-tqdm", "--output-file", str(out)]
    cmd += ["--warmup-requests", "1"]
    cpu, tokens, wall, _ = timed(cmd, url, dict(os.environ, **OFFLINE), 600)
    got = json.loads(out.read_text().strip().splitlines()[-1])
    return run_of(got, cpu, tokens, wall)


def _f(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def row(name: str, run: Run, startup: Run | None) -> str:
    per_1m = run.cpu_s / run.tokens * 1e6 if run.tokens else None
    excl = None
    if startup is not None and run.tokens > startup.tokens:
        excl = (run.cpu_s - startup.cpu_s) / (run.tokens - startup.tokens) * 1e6
    return (
        f"{name:<18} {_f(run.tok_s, ',.0f'):>9} {_f(run.ttft[0]):>7} / {_f(run.ttft[1]):<7} "
        f"{_f(run.itl[0], '.2f'):>6} / {_f(run.itl[1], '.2f'):<6} {_f(per_1m):>9} {_f(excl):>11} "
        f"{run.cpu_s:>7.1f} {run.tokens:>9,} {run.wall_s:>6.0f}"
    )


HEADER = (
    f"{'client':<18} {'out tok/s':>9} {'TTFT p50 / p99 ms':>17} {'ITL p50 / p99 ms':>15} "
    f"{'CPU-s/1M':>9} {'excl. start':>11} {'CPU-s':>7} {'tokens':>9} {'wall s':>6}"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--output", type=int, default=128, help="output tokens per request")
    parser.add_argument("--seconds", type=float, default=20.0, help="about how long each client's step runs")
    parser.add_argument("--vllm", default=str(CACHE / "vllm-venv/bin/python"), help="the vLLM venv's python")
    parser.add_argument("--sglang", default="/work/venvs/sglang/bin/python", help="a python with sglang")
    parser.add_argument("--tokenizer", default="", help="a local model folder with a tokenizer")
    args = parser.parse_args()
    if not args.tokenizer:
        found = sorted(CACHE.glob("tiny-llama-*/tokenizer.json"))
        args.tokenizer = str(found[0].parent) if found else ""
    if not 1 <= args.streams <= 1024 or not 1 <= args.output <= 4096 or not 2 <= args.seconds <= 300:
        print("bench_parity: --streams 1..1024, --output 1..4096, --seconds 2..300", file=sys.stderr)
        return 2
    per_request_s = (TTFT_MS + (args.output - 1) * TPOT_MS) / 1000
    prompts = max(args.streams, round(args.seconds / per_request_s) * args.streams)
    sim = spawn_sim_process(build_config("fast"))
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(sim.pid, {0})
    ideal = args.streams * args.output / per_request_s
    print(
        f"bench_parity: one simulator 'fast' (TTFT {TTFT_MS:g} ms, {TPOT_MS:g} ms/token: the truth) on CPU 0, "
        f"each client on CPU 1; {args.streams} streams, {INPUT} in / {args.output} out, ignore_eos, "
        f"~{args.seconds:g} s ({prompts} prompts for the prompt-count tools); ideal {ideal:,.0f} tok/s; "
        f"tokenizer {args.tokenizer or 'none found'}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="ramp-parity-"))
    clients: list[tuple[str, Any, Any, Any]] = [("ramp", run_ramp, args.seconds, 4.0)]
    missing: list[str] = []
    for name, python, fn in (
        ("vllm bench serve", args.vllm, run_vllm),
        ("sglang bench_serving", args.sglang, run_sglang),
    ):
        if not os.path.exists(python):
            missing.append(f"{name}: no interpreter at {python}")
        elif not args.tokenizer:
            missing.append(f"{name}: no tokenizer folder (--tokenizer)")
        else:
            clients.append((name, fn, prompts, args.streams))
    lines = []
    try:
        for name, fn, full, small in clients:
            try:
                startup = fn(sim.url, args, tmp, small)
                run = fn(sim.url, args, tmp, full)
            except (RuntimeError, OSError, ValueError, KeyError) as exc:
                lines.append(f"{name:<18} failed: {exc}")
                continue
            lines.append(row(name, run, startup))
            print(lines[-1], flush=True)
    finally:
        sim.stop()
    print(HEADER)
    print("\n".join(lines))
    print(f"{'truth':<18} {ideal:>9,.0f} {TTFT_MS:>7.1f} / {TTFT_MS:<7.1f} {TPOT_MS:>6.2f} / {TPOT_MS:<6.2f}")
    for line in missing:
        print(f"left out: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
