"""Does the console change what it measures? TTFT with the console open vs headless, same load, same server.

Runs the simulator's fast preset (true TTFT 50 ms, 10 ms/token) in its own process, then alternates runs of
``ramp run URL --steps 256`` headless and with the console open, each in a tmux session of its own (160x48,
console at 4 Hz), and prints each run's TTFT p50/p99 from its record, and the console-minus-headless difference:

    python scripts/bench_console.py [--streams 256] [--seconds 10] [--rounds 2]

A benchmark that prints numbers (docs/numbers.md), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.cli.selftest import SELFTEST_PROFILE  # noqa: E402
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402


def last_step(record: Path) -> dict | None:
    step = None
    for line in record.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "step":
            step = obj
    return step


def has_end(record: Path) -> bool:
    if not record.exists():
        return False
    return any(
        json.loads(ln).get("type") == "event" and json.loads(ln).get("kind") == "end"
        for ln in record.read_text().splitlines()
        if ln.strip().startswith("{") and ln.strip().endswith("}")
    )


def ttft(step: dict) -> tuple[float, float]:
    t = step.get("ttft_ms") or {}
    return float(t.get("p50")), float(t.get("p99"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    opts = ap.parse_args()
    if shutil.which("tmux") is None:
        print("bench_console: tmux is needed (apt-get install -y tmux)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="ramp-bench-console-"))
    profile = tmp / "selftest.toml"
    profile.write_text(SELFTEST_PROFILE, encoding="utf-8")
    handle = spawn_sim_process(build_config("fast"))
    ncpu = os.cpu_count() or 1
    if ncpu > 1:
        os.sched_setaffinity(handle.pid, {ncpu - 1})
    env = dict(os.environ, RAMP_WORKER_CPUS=",".join(str(c) for c in range(max(1, ncpu - 1))))
    common = [
        "--profile", str(profile), "--steps", str(opts.streams), "--step-seconds", str(opts.warmup + opts.seconds),
        "--warmup", str(opts.warmup), "--no-metrics",
    ]  # fmt: skip
    rows = []
    try:
        for rnd in range(opts.rounds):
            for face in ("headless", "console"):
                out = tmp / f"{face}-{rnd}.jsonl"
                cmd = [sys.executable, "-m", "loadgen.cli", "run", handle.url, *common, "--out", str(out)]
                if face == "headless":
                    cmd.append("--headless")
                # Both faces run in a tmux session of their own: on Linux a session is a scheduler autogroup,
                # so running one face from this script's session (the simulator's) would favour it.
                session = f"ramp-bench-{os.getpid()}-{face}-{rnd}"
                shell = " ".join(f"'{c}'" for c in cmd)
                subprocess.run(
                    ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48",
                     f"env TERM=xterm-256color RAMP_WORKER_CPUS={env['RAMP_WORKER_CPUS']} {shell}"],
                    check=True,
                )  # fmt: skip
                deadline = time.monotonic() + opts.warmup + opts.seconds + 60
                # The console keeps a finished plan open for the next key: its run is done once its step is.
                done = (
                    has_end
                    if face == "headless"
                    else (lambda r: last_step(r) is not None if r.exists() else False)
                )
                while time.monotonic() < deadline and not done(out):
                    time.sleep(0.5)  # waiting for a run to finish, in a benchmark
                if face == "console":
                    subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=False)
                time.sleep(1.0)
                subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)
                step = last_step(out) if out.exists() else None
                if step is None:
                    print(f"{face} round {rnd}: no step recorded", file=sys.stderr)
                    continue
                p50, p99 = ttft(step)
                rows.append((face, rnd, p50, p99, step.get("out_tok_s")))
                print(
                    f"{face:<9} round {rnd}: TTFT p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  out {step.get('out_tok_s'):,.0f} tok/s",
                    flush=True,
                )
    finally:
        handle.stop()
    for stat, idx in (("p50", 2), ("p99", 3)):
        h = [r[idx] for r in rows if r[0] == "headless"]
        c = [r[idx] for r in rows if r[0] == "console"]
        if h and c:
            print(f"TTFT {stat}: headless mean {sum(h) / len(h):.2f} ms, console mean {sum(c) / len(c):.2f} ms, "
                  f"difference {sum(c) / len(c) - sum(h) / len(h):+.2f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
