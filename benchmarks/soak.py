"""Soak: N streams for M minutes against the simulator's fast mode, sampling the RSS and open file descriptors
of every ramp process (the main process, its load workers, multiprocessing's resource tracker) — a benchmark
that prints numbers, not a test.

    python benchmarks/soak.py --streams 1000 --minutes 30 --every 30 [--tpot-ms 10] [--csv soak.csv]

It starts ``python -m loadgen.sim`` (fast preset) and ``ramp run URL --headless`` as subprocesses, reads
/proc every ``--every`` seconds, and prints one line per sample (elapsed, processes, total RSS MiB, total
fds) and a summary: first vs last RSS and fds per process kind, and the run's step line. Linux only.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loadgen.sim import build_config, spawn_sim_process  # noqa: E402


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant (from /proc/*/stat parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def sample(pid: int) -> tuple[float, int] | None:
    """(RSS MiB, open fds) of one process, None once it is gone."""
    try:
        rss_kb = next(
            int(line.split()[1])
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        )
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None
    return rss_kb / 1024, fds


def kind(pid: int, main: int) -> str:
    if pid == main:
        return "main"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"
    if "resource_tracker" in cmd:
        return "tracker"
    return "worker" if "spawn_main" in cmd else "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--tpot-ms", type=float, default=10.0, help="the fast simulator's time per token")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--csv", default=None, help="write the series here too")
    args = ap.parse_args()
    sim = spawn_sim_process(build_config("fast", fixed_tpot_ms=args.tpot_ms))
    out = Path(tempfile.mkdtemp(prefix="ramp-soak-")) / "soak.jsonl"
    seconds = args.minutes * 60
    cmd = [sys.executable, "-m", "loadgen.cli", "run", sim.url, "--headless", "--profile", "decode-heavy"]
    cmd += ["--steps", str(args.streams), "--step-seconds", str(seconds), "--warmup", "0"]
    cmd += ["--workers", str(args.workers), "--no-metrics", "--out", str(out)]
    ramp = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    rows: list[dict[str, object]] = []
    first: dict[str, tuple[float, int]] = {}
    t0 = time.monotonic()
    try:
        while ramp.poll() is None:
            elapsed = time.monotonic() - t0
            per_kind: dict[str, tuple[float, int]] = {}
            for pid in tree(ramp.pid):
                got = sample(pid)
                if got is not None:
                    rss, fds = per_kind.get(kind(pid, ramp.pid), (0.0, 0))
                    per_kind[kind(pid, ramp.pid)] = (rss + got[0], fds + got[1])
            for name, value in per_kind.items():
                first.setdefault(name, value)
            row: dict[str, object] = {"elapsed_s": round(elapsed)}
            for name, (rss, fds) in sorted(per_kind.items()):
                row[f"{name}_rss_mib"], row[f"{name}_fds"] = round(rss, 1), fds
            rows.append(row)
            print(json.dumps(row), flush=True)
            deadline = time.monotonic() + args.every
            while ramp.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)  # a sampling period, not a synchronisation
    finally:
        if ramp.poll() is None:
            ramp.terminate()
        ramp.wait(60)
        sim.stop()
    if args.csv:
        keys = sorted({k for r in rows for k in r}, key=lambda k: (k != "elapsed_s", k))
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, keys)
            writer.writeheader()
            writer.writerows(rows)
    last = {k: v for k, v in rows[-1].items()} if rows else {}
    print("first:", {k: v for k, v in first.items()})
    print("last: ", last)
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    steps = [line for line in lines if line.get("type") == "step"]
    for step in steps:
        print(
            f"step: {step['level']} streams, ok {step['ok']}, errors {sum(step['errors'].values())}, "
            f"out {step['out_tok_s']:.0f} tok/s, client_bound {step['client_bound']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
