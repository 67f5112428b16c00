"""``ramp selftest``: the load generator's own ceiling, measured against the simulator's fast mode, and how
it scales with more load workers (``--workers 1,2,4,8 --per-worker``, local processes or ``--ray``).

The simulator's "fast" preset answers every request with a true TTFT of 50 ms and then one token every
10 ms, with no batching slow-down, so the ideal is known exactly: S streams of 256-token replies give
S * 256 / (0.050 + 255 * 0.010) output tokens per second, and every TTFT should read 50 ms. Whatever the
client loses against that ideal (throughput, TTFT read too high) is the client's own cost. The simulator
runs in its own process on its own core; the load workers are pinned to the other core(s).

Printed per (workers, streams): achieved/ideal tokens, CPU seconds per 1M streamed tokens (the workers'
user+system time from /proc), TTFT error p50/p99 (measured - 50 ms), and whether the client-bound flag rose.

Scaling (``layout`` gives each part its cores): with ``--per-worker`` the stream counts are per
worker, several simulator processes (one per core left over, ``--sims``) serve as one multi-URL target, and
each row's scaling is its tokens/s over N times one worker's at the same streams per worker. The goal: at
least 0.95 while the simulators keep up (their own TTFT p99 within 20 % of 50 ms).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadgen import measures
from loadgen.config import RampPlan, Transport
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.ray_fleet import shown_address
from loadgen.types import Target

if TYPE_CHECKING:
    from loadgen.run.engine import Engine
    from loadgen.sim import SimHandle

TTFT_MS = 50.0
TPOT_MS = 10.0
OUTPUT_TOKENS = 256
SCALING_GOAL = 0.95  # N workers reach at least this share of N times one worker's tokens/s
SIM_LATE = 1.2  # the simulators keep up while their own TTFT p99 stays within 20 % of the true TTFT

SELFTEST_PROFILE = f"""
name = "selftest"
description = "fixed short prompt, {OUTPUT_TOKENS} output tokens, ignore_eos: the client's own ceiling"
[target]
api = "chat"
model = "auto"
[[bucket]]
name = "fixed"
input = 16
output = {OUTPUT_TOKENS}
[sampling]
ignore_eos = true
"""


@dataclass(frozen=True, slots=True)
class SelftestRow:
    workers: int
    streams: int
    out_tok_s: float
    ideal_tok_s: float
    cpu_s_per_1m: float | None
    ttft_err_p50_ms: float | None
    ttft_err_p99_ms: float | None
    client_bound: bool
    requests: int
    errors: int
    loop_lag_ms_max: float | None = None
    server_ttft_p50_ms: float | None = None  # the simulator's own TTFT (its lateness is not the client's)
    server_ttft_p99_ms: float | None = None
    read_delay_p50_ms: float | None = None  # client's first-token stamp - the simulator's write of it
    read_delay_p99_ms: float | None = None

    @property
    def ratio(self) -> float:
        return self.out_tok_s / self.ideal_tok_s if self.ideal_tok_s else 0.0


def ideal_tok_s(streams: int) -> float:
    per_request_s = (TTFT_MS + (OUTPUT_TOKENS - 1) * TPOT_MS) / 1000.0
    return streams * OUTPUT_TOKENS / per_request_s


def _cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class _Window:
    """The measurement window of one row: when it began and the workers' CPU seconds at both ends."""

    start_ns: int
    cpu_s: float | None
    loop_lag_ms_max: float


@dataclass(frozen=True, slots=True)
class Bench:
    """What every row runs against and with: the simulators (one URL each, one multi-URL target), the
    transport, the seconds measured and warmed up per row, and ``--ray`` (None: local processes)."""

    urls: tuple[str, ...]
    handles: tuple[SimHandle, ...] = ()
    transport: Transport = "h1"
    seconds: float = 8.0
    warmup: float = 3.0
    ray: str | None = None


def _config(bench: Bench, streams: int, workers: int) -> RunConfig:
    profile = parse_profile(SELFTEST_PROFILE, source="<selftest>")
    urls = bench.urls
    return RunConfig(
        target=Target(url=urls[0], api="chat", replicas=urls if len(urls) > 1 else ()),
        profile=profile,
        plan=RampPlan(levels=(float(streams),), step_s=bench.warmup + bench.seconds, warmup_s=bench.warmup),
        workers=workers,
        telemetry=False,
        transport=bench.transport,
        max_connections=streams + 16,
        ray=bench.ray,
    )


def _measure(engine: Engine, seconds: float) -> _Window:
    """Wait out the warm-up, then read the workers' CPU over ``seconds`` of measurement."""
    cpu0: dict[int, float] = {}
    t_measure: float | None = None
    t_measure_ns = 0
    lag_max = 0.0
    while not engine.done:
        snap = engine.latest()
        if snap is not None and snap.state == "running" and not snap.warming_up and t_measure is None:
            t_measure = time.monotonic()
            t_measure_ns = time.monotonic_ns()
            cpu0 = {pid: _cpu_seconds(pid) or 0.0 for pid in engine.worker_pids()}
        if t_measure is not None and snap is not None and snap.health.loop_lag_ms_max is not None:
            lag_max = max(lag_max, snap.health.loop_lag_ms_max)
        if t_measure is not None and time.monotonic() - t_measure >= seconds * 0.98:
            break
        time.sleep(0.05)  # polling a snapshot for a benchmark, not synchronising a test
    cpu1 = {pid: _cpu_seconds(pid) for pid in cpu0}
    cpu = sum((cpu1[p] or 0.0) - cpu0[p] for p in cpu0) if cpu0 else None
    return _Window(start_ns=t_measure_ns, cpu_s=cpu, loop_lag_ms_max=lag_max)


def _p50_p99(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    import numpy as np

    p50, p99 = (float(v) for v in np.percentile(values, [50, 99]))
    return p50, p99


def _server_ttft(truth: list[dict[str, Any]], since_ns: int) -> tuple[float | None, float | None]:
    """The simulator's own TTFT p50/p99 over the window: its lateness is not the client's."""
    return _p50_p99(
        [
            (g["first_token_ns"] - g["arrival_ns"]) / 1e6
            for g in truth
            if g.get("first_token_ns") and g.get("arrival_ns", 0) >= since_ns
        ]
    )


def read_delays(
    truth_list: list[dict[str, Any]], since_ns: int, trace_dir: str
) -> tuple[float | None, float | None]:
    """Client's first-token stamp minus the simulator's write of it, p50/p99, from the workers' traces
    (their request lines: a worker also writes where it cut its windows, lines without a request)."""
    import glob
    import json

    truth = {g.get("request_id"): g for g in truth_list if g.get("request_id")}
    written = {k: g.get("first_token_ns") for k, g in truth.items()}
    delays, send_delays, prep = [], [], []
    for path in glob.glob(os.path.join(trace_dir, "trace-*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                if "request_id" not in rec:  # a window cut ({"cut": window, "at_ns": ...})
                    continue
                w = written.get(rec["request_id"])
                if w and rec["first_token_ns"] and rec["sent_ns"] >= since_ns:
                    delays.append((rec["first_token_ns"] - w) / 1e6)
                    send_delays.append((truth[rec["request_id"]]["arrival_ns"] - rec["sent_ns"]) / 1e6)
                    prep.append((rec["sent_ns"] - rec["intended_ns"]) / 1e6)
        os.remove(path)
    if delays and os.environ.get("RAMP_SELFTEST_DEBUG"):
        import numpy as np

        print("send->sim arrival p50/p99/max", np.percentile(send_delays, [50, 99, 100]))
        print("intended->sent p50/p99/max", np.percentile(prep, [50, 99, 100]))
        print("read delay p50/p90/p99/max", np.percentile(delays, [50, 90, 99, 100]))
    return _p50_p99(delays)


def run_one(bench: Bench, streams: int, workers: int) -> SelftestRow:
    from loadgen.run.engine import Engine

    seconds, warmup = bench.seconds, bench.warmup
    engine = Engine(_config(bench, streams, workers))
    engine.start()
    window = _measure(engine, seconds)
    outcome = engine.wait(timeout=seconds + warmup + 90)
    if outcome is None or not outcome.steps:
        raise RuntimeError(f"selftest run produced no step ({outcome.message if outcome else 'timeout'})")
    step = outcome.steps[-1]
    stats = step.stats
    ttft = stats.pct(measures.TTFT_MS)
    out_tokens_window = (stats.out_tok_s or 0.0) * step.window_s
    cpu_per_1m = None
    if window.cpu_s is not None and out_tokens_window > 0:
        cpu_per_1m = window.cpu_s * (step.window_s / seconds) / out_tokens_window * 1e6
    server_p50 = server_p99 = read_p50 = read_p99 = None
    trace_dir = os.environ.get("RAMP_TRACE_DIR")
    if bench.handles:
        truth = [g for handle in bench.handles for g in handle.ground_truth()]
        server_p50, server_p99 = _server_ttft(truth, window.start_ns)
        if trace_dir:
            read_p50, read_p99 = read_delays(truth, window.start_ns, trace_dir)
    return SelftestRow(
        loop_lag_ms_max=window.loop_lag_ms_max,
        read_delay_p50_ms=read_p50,
        read_delay_p99_ms=read_p99,
        server_ttft_p50_ms=server_p50,
        server_ttft_p99_ms=server_p99,
        workers=workers,
        streams=streams,
        out_tok_s=stats.out_tok_s or 0.0,
        ideal_tok_s=ideal_tok_s(streams),
        cpu_s_per_1m=cpu_per_1m,
        ttft_err_p50_ms=None if ttft.p50 is None else ttft.p50 - TTFT_MS,
        ttft_err_p99_ms=None if ttft.p99 is None else ttft.p99 - TTFT_MS,
        client_bound=step.client_bound,
        requests=stats.ok,
        errors=stats.error_count,
    )


def _f(v: float | None, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def format_rows(rows: list[SelftestRow], scales: Sequence[float | None] = ()) -> str:
    """The table; ``scales``: each row's scaling (``scaling``), a column of its own when given."""
    f = _f
    lines = [
        f"{'workers':>7} {'streams':>7} {'out tok/s':>10} {'ideal':>10} {'achieved/ideal':>14} "
        + (f"{'scaling':>7} " if scales else "")
        + f"{'CPU-s/1M tok':>12} {'TTFT err p50':>12} {'TTFT err p99':>12} {'sim TTFT p50/p99':>16} "
        f"{'read delay p50/p99':>18} {'loop lag max':>12} {'client-bound':>12} {'ok':>6} {'err':>4}"
    ]
    for at, r in enumerate(rows):
        scale = f"{f(scales[at], '.3f'):>7} " if scales else ""
        lines.append(
            f"{r.workers:>7} {r.streams:>7} {r.out_tok_s:>10,.0f} {r.ideal_tok_s:>10,.0f} {r.ratio:>14.3f} "
            f"{scale}{f(r.cpu_s_per_1m, '.1f'):>12} {f(r.ttft_err_p50_ms, '.1f'):>9} ms "
            f"{f(r.ttft_err_p99_ms, '.1f'):>9} ms "
            f"{f(r.server_ttft_p50_ms, '.1f'):>7}/{f(r.server_ttft_p99_ms, '.1f'):<5} ms "
            f"{f(r.read_delay_p50_ms, '.2f'):>8}/{f(r.read_delay_p99_ms, '.2f'):<6} ms "
            f"{f(r.loop_lag_ms_max, '.1f'):>9} ms "
            f"{'YES' if r.client_bound else 'no':>12} {r.requests:>6} {r.errors:>4}"
        )
    return "\n".join(lines)


def scaling(rows: Sequence[SelftestRow]) -> list[float | None]:
    """Each row's tokens/s over N times one worker's at the same streams per worker (None: no 1-worker row)."""
    one = {r.streams: r.out_tok_s for r in rows if r.workers == 1}
    out: list[float | None] = []
    for r in rows:
        base = one.get(r.streams // max(1, r.workers)) if r.streams % max(1, r.workers) == 0 else None
        out.append(r.out_tok_s / (r.workers * base) if base else None)
    return out


def sims_kept_up(row: SelftestRow) -> bool:
    """The simulators answered on time: their own TTFT p99 within ``SIM_LATE`` of the true 50 ms."""
    return row.server_ttft_p99_ms is not None and row.server_ttft_p99_ms <= TTFT_MS * SIM_LATE


def verdicts(rows: Sequence[SelftestRow]) -> list[str]:
    """One line per multi-worker row: its scaling against the goal, and whether the simulators kept up."""
    lines = []
    for row, scale in zip(rows, scaling(rows), strict=True):
        if row.workers < 2 or scale is None:
            continue
        met = "met" if scale >= SCALING_GOAL else "NOT met"
        sims = (
            "the simulators kept up"
            if sims_kept_up(row)
            else "the simulators fell behind (their TTFT p99 "
            f"{_f(row.server_ttft_p99_ms, '.0f')} ms): add --sims or cores, the figure is theirs"
        )
        lines.append(
            f"{row.workers} workers x {row.streams // row.workers} streams: scaling {scale:.3f} "
            f"(goal >= {SCALING_GOAL}: {met}); {sims}"
        )
    return lines


@dataclass(frozen=True, slots=True)
class Layout:
    """Which cores the load workers get (each one its own) and the simulators (one process each)."""

    controller_cpu: int | None  # None: shared (a machine too small for a core of its own)
    worker_cpus: tuple[int, ...]
    sim_cpus: tuple[int, ...]


def layout(cpus: Sequence[int], max_workers: int, sims: int | None = None) -> Layout:
    """The controller on the first core, one core per worker, one simulator per core left over; a machine
    too small for that shares: the workers (and the controller) on all but the last core, the simulators
    on the last."""
    cpus = sorted(cpus)
    if len(cpus) >= max_workers + 2:
        controller: int | None = cpus[0]
        workers, rest = cpus[1 : 1 + max_workers], cpus[1 + max_workers :]
    else:
        controller, workers, rest = None, cpus[:-1] or cpus, cpus[-1:]
    count = len(rest) if sims is None else max(1, sims)
    return Layout(controller, tuple(workers), tuple(rest[i % len(rest)] for i in range(count)))


def _parse(args: argparse.Namespace) -> tuple[list[int], list[int]] | None:
    try:
        streams = [int(s) for s in str(args.streams).split(",") if s]
        workers = [int(w) for w in str(args.workers).split(",") if w]
    except ValueError:
        return None
    return (streams, workers) if streams and workers and min(streams + workers) > 0 else None


def _start_ray(address: str | None) -> bool:
    """``--ray``: one Ray for every row (a row's fleet finds it started and leaves it up)."""
    if address is None:
        return True
    from loadgen.config import SetupError
    from loadgen.run.ray_fleet import init_ray

    try:
        init_ray(address)  # ramp's own Ray listens on 127.0.0.1 only; messages keep no password
    except SetupError as exc:
        print(f"ramp selftest: {exc}", file=sys.stderr)
        return False
    return True


def selftest_main(args: argparse.Namespace) -> int:
    import tempfile

    from loadgen.sim import build_config, spawn_sim_process

    parsed = _parse(args)
    if parsed is None:
        print(
            "ramp selftest: --streams and --workers take positive numbers separated by commas",
            file=sys.stderr,
        )
        return 2
    streams, workers = parsed
    cpus = (
        sorted(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else list(range(os.cpu_count() or 1))
    )
    plan = layout(cpus, max(workers), args.sims)
    pin = len(cpus) > 1 and hasattr(os, "sched_setaffinity")
    handles = [spawn_sim_process(build_config("fast")) for _ in plan.sim_cpus]
    try:
        if pin:
            for handle, cpu in zip(handles, plan.sim_cpus, strict=True):
                os.sched_setaffinity(handle.pid, {cpu})
            if plan.controller_cpu is not None:
                os.sched_setaffinity(0, {plan.controller_cpu})
        os.environ["RAMP_WORKER_CPUS"] = ",".join(str(c) for c in plan.worker_cpus)
        os.environ["RAMP_TRACE_DIR"] = tempfile.mkdtemp(prefix="ramp-selftest-")
        ray = args.ray
        if not _start_ray(ray):
            return 2
        bench = Bench(tuple(h.url for h in handles), tuple(handles), args.transport, args.seconds, 3.0, ray)
        per_worker = bool(args.per_worker)
        print(_banner(plan, bench, per_worker), flush=True)
        rows = _rows(bench, streams, workers, per_worker)
        if per_worker:
            print(format_rows(rows, scaling(rows)))
            for line in verdicts(rows):
                print(line)
    finally:
        for handle in handles:
            handle.stop()
    return 0


def _banner(plan: Layout, bench: Bench, per_worker: bool) -> str:
    sims = ",".join(str(c) for c in plan.sim_cpus)
    at = f" at {shown_address(bench.ray, bench.ray)}" if bench.ray else ""
    fleet = "Ray actors" + at if bench.ray is not None else "processes"
    return (
        f"ramp selftest: {len(bench.urls)} simulator(s) 'fast' (TTFT {TTFT_MS:.0f} ms, {TPOT_MS:.0f} ms/token, "
        f"{OUTPUT_TOKENS} tokens) on CPU {sims}, load workers ({fleet}) on CPU "
        f"{','.join(str(c) for c in plan.worker_cpus)}"
        + (f", controller on CPU {plan.controller_cpu}" if plan.controller_cpu is not None else "")
        + f", transport {bench.transport}, {bench.seconds:.0f} s measured per row"
        + (", streams per worker" if per_worker else "")
    )


def _rows(bench: Bench, streams: list[int], workers: list[int], per_worker: bool) -> list[SelftestRow]:
    rows: list[SelftestRow] = []
    for w in workers:
        for s in streams:
            rows.append(run_one(bench, s * w if per_worker else s, w))
            table = format_rows(rows[-1:])
            print(table.splitlines()[-1] if len(rows) > 1 else table, flush=True)
    return rows
