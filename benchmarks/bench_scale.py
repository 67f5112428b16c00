"""Linear over cores: N load workers against N times one worker's tokens/s, servers off the workers' cores.

Run: ``python benchmarks/bench_scale.py [--workers 1,2,4,8,16] [--streams 256] [--seconds 8]
[--sims-per-worker 2] [--budget-s 1200]`` (``scripts/scale_bench.sh`` runs it under a ``timeout``).
Prints a table; asserts nothing. Offline: the checkout and its installed dependencies only, 127.0.0.1.

Each row is one closed-loop step of the whole engine (``ramp selftest``'s, ``loadgen.cli.selftest``) with
``--streams`` streams per worker against the simulator's fast preset (a true TTFT of 50 ms, 10 ms a token,
256 tokens, no batching slow-down: the ideal is known). The cores are laid out per row: the controller
(this process) on the first core, the N workers one core each on the next N, and the simulators (fresh
for each row, one multi-URL target, ``--sims-per-worker`` processes per worker) pinned to the cores left
over (``sched_setaffinity``, what ``taskset`` does). A row without a core left for the simulators shares
(the simulators and the controller on the workers' cores) and says so: its scaling is the machine's,
not the client's.

Per row: tokens/s and the ideal, achieved/ideal, ``N x one`` (N times the one-worker row's tokens/s),
scaling (tokens/s over ``N x one``, the goal 1 +- 5 %), the workers' CPU (the share of their cores, and
CPU seconds per 1M tokens: a worker near 100 % is at its own ceiling), the simulators' own TTFT p99
(within 20 % of 50 ms: they kept up; else the row measures them) and the errors.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.cli.selftest import Bench, SelftestRow, run_one, sims_kept_up  # noqa: E402 - after the path
from loadgen.sim import build_config, spawn_sim_process  # noqa: E402

GOAL = 0.05  # scaling within 1 +- 5 %


@dataclass(frozen=True)
class Placement:
    controller: int
    workers: tuple[int, ...]
    sims: tuple[int, ...]  # one entry per simulator process: the core it is pinned to
    shared: bool  # no core was left for the simulators: they run on the workers' cores


def place(cpus: list[int], workers: int, sims_per_worker: int) -> Placement:
    """The controller first, one core per worker, the simulators round-robin on the cores left over."""
    if len(cpus) >= workers + 2:
        controller, mine, rest = cpus[0], cpus[1 : 1 + workers], cpus[1 + workers :]
        shared = False
    else:  # too few cores: the workers on the last ones, the rest (or all of them) shared
        mine = cpus[-workers:] if workers < len(cpus) else cpus[:workers]
        rest = [c for c in cpus if c not in mine] or cpus
        controller, shared = rest[0], workers >= len(cpus)
    count = max(1, min(len(rest), sims_per_worker * workers)) if not shared else max(1, workers)
    return Placement(controller, tuple(mine), tuple(rest[i % len(rest)] for i in range(count)), shared)


def run_row(
    workers: int, streams: int, cpus: list[int], args: argparse.Namespace
) -> tuple[SelftestRow, Placement]:
    where = place(cpus, workers, args.sims_per_worker)
    handles = [spawn_sim_process(build_config("fast")) for _ in where.sims]
    try:
        for handle, cpu in zip(handles, where.sims, strict=True):
            os.sched_setaffinity(handle.pid, {cpu})
        os.sched_setaffinity(0, {where.controller})
        os.environ["RAMP_WORKER_CPUS"] = ",".join(str(c) for c in where.workers)
        bench = Bench(tuple(h.url for h in handles), tuple(handles), "h1", args.seconds, args.warmup)
        return run_one(bench, streams * workers, workers), where
    finally:
        for handle in handles:
            handle.stop()
        os.sched_setaffinity(0, set(cpus))


def _f(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


HEADER = (
    f"{'workers':>7} {'streams':>7} {'sims@cores':>14} {'out tok/s':>10} {'ideal':>10} {'ach/ideal':>9} "
    f"{'N x one':>10} {'scaling':>8} {'±5 %':>5} {'worker CPU':>10} {'CPU-s/1M':>8} {'sim TTFT p99':>12} "
    f"{'err':>5}  note"
)


def line(row: SelftestRow, where: Placement, one: float | None) -> str:
    n = row.workers
    base = None if one is None else n * one
    scale = None if not base else row.out_tok_s / base
    within = "n/a" if scale is None else ("yes" if abs(scale - 1) <= GOAL else "NO")
    cpu_share = None
    if row.cpu_s_per_1m is not None:
        cpu_share = row.cpu_s_per_1m * row.out_tok_s / 1e6 / n  # CPU-s per second, per worker core
    cores = ",".join(str(c) for c in sorted(set(where.sims)))
    notes = []
    if where.shared:
        notes.append("shared: the simulators on the workers' cores")
    if not sims_kept_up(row):
        notes.append("the simulators fell behind")
    if row.client_bound:
        notes.append("client-bound flag")
    return (
        f"{n:>7} {row.streams:>7} {f'{len(where.sims)}@{cores}':>14} {row.out_tok_s:>10,.0f} "
        f"{row.ideal_tok_s:>10,.0f} {row.ratio:>9.3f} {_f(base, ',.0f'):>10} {_f(scale, '.3f'):>8} "
        f"{within:>5} {_f(None if cpu_share is None else 100 * cpu_share, '.0f') + ' %':>10} "
        f"{_f(row.cpu_s_per_1m, '.1f'):>8} {_f(row.server_ttft_p99_ms, '.1f') + ' ms':>12} "
        f"{row.errors:>5}  {'; '.join(notes)}"
    )


def _out_of_time(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8,16", help="comma-separated worker counts")
    parser.add_argument("--streams", type=int, default=256, help="streams per worker")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per row")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--sims-per-worker", type=int, default=2, help="simulator processes per worker")
    parser.add_argument(
        "--budget-s", type=float, default=1200.0, help="stop (with the rows so far) after this"
    )
    args = parser.parse_args()
    try:
        counts = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or not 1 <= args.streams <= 8192 or not 1 <= args.seconds <= 600:
        print(
            "bench_scale: --workers wants counts >= 1, --streams 1..8192, --seconds 1..600", file=sys.stderr
        )
        return 2
    if not hasattr(os, "sched_setaffinity"):
        print("bench_scale: needs Linux (sched_setaffinity) to pin workers and simulators", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    skipped = [n for n in counts if n > len(cpus)]
    counts = [n for n in counts if n <= len(cpus)]
    if 1 not in counts:
        counts.insert(0, 1)  # the baseline every row is scaled by
    print(
        f"bench_scale: {len(cpus)} cores, workers {','.join(map(str, counts))}"
        + (f" (not {','.join(map(str, skipped))}: more than the cores)" if skipped else "")
        + f", {args.streams} streams per worker, {args.seconds:g} s measured per row after {args.warmup:g} s, "
        f"{args.sims_per_worker} simulator(s) 'fast' per worker on the cores left over",
        flush=True,
    )
    print(HEADER, flush=True)
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.setitimer(signal.ITIMER_REAL, args.budget_s)
    started, one = time.monotonic(), None
    try:
        for n in counts:
            row, where = run_row(n, args.streams, cpus, args)
            if n == 1:
                one = row.out_tok_s
            print(line(row, where, one), flush=True)
    except TimeoutError:
        print(
            f"bench_scale: stopped after {time.monotonic() - started:.0f} s (--budget-s): rows so far above"
        )
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
