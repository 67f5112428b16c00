"""``ramp selftest``: the load generator's own ceiling, measured against the simulator's fast mode.

The simulator's "fast" preset answers every request with a true TTFT of 50 ms and then one token every
10 ms, with no batching slow-down, so the ideal is known exactly: S streams of 256-token replies give
S * 256 / (0.050 + 255 * 0.010) output tokens per second, and every TTFT should read 50 ms. Whatever the
client loses against that ideal (throughput, TTFT read too high) is the client's own cost. The simulator
runs in its own process on its own core; the load workers are pinned to the other core(s).

Printed per (workers, streams): achieved/ideal tokens, CPU seconds per 1M streamed tokens (the workers'
user+system time from /proc), TTFT error p50/p99 (measured - 50 ms), and whether the client-bound flag rose.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadgen.config import RampPlan, RunConfig, Transport
from loadgen.profile import parse_profile
from loadgen.types import Target

if TYPE_CHECKING:
    from loadgen.run.engine import Engine
    from loadgen.sim import SimHandle

TTFT_MS = 50.0
TPOT_MS = 10.0
OUTPUT_TOKENS = 256

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


def _config(
    url: str, streams: int, workers: int, seconds: float, warmup: float, transport: Transport
) -> RunConfig:
    profile = parse_profile(SELFTEST_PROFILE, source="<selftest>")
    return RunConfig(
        target=Target(url=url, api="chat"),
        profile=profile,
        plan=RampPlan(levels=(float(streams),), step_s=warmup + seconds, warmup_s=warmup),
        workers=workers,
        telemetry=False,
        transport=transport,
        max_connections=streams + 16,
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


def _read_delays(
    truth_list: list[dict[str, Any]], since_ns: int, trace_dir: str
) -> tuple[float | None, float | None]:
    """Client's first-token stamp minus the simulator's write of it, p50/p99, from the workers' traces."""
    import glob
    import json

    truth = {g.get("request_id"): g for g in truth_list if g.get("request_id")}
    written = {k: g.get("first_token_ns") for k, g in truth.items()}
    delays, send_delays, prep = [], [], []
    for path in glob.glob(os.path.join(trace_dir, "trace-*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
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


def run_one(
    url: str,
    streams: int,
    workers: int,
    seconds: float,
    warmup: float,
    transport: Transport,
    handle: SimHandle | None = None,
) -> SelftestRow:
    from loadgen.run.engine import Engine

    engine = Engine(_config(url, streams, workers, seconds, warmup, transport))
    engine.start()
    window = _measure(engine, seconds)
    outcome = engine.wait(timeout=seconds + warmup + 60)
    if outcome is None or not outcome.steps:
        raise RuntimeError(f"selftest run produced no step ({outcome.message if outcome else 'timeout'})")
    step = outcome.steps[-1]
    stats = step.stats
    ttft = stats.pct("ttft_ms")
    out_tokens_window = (stats.out_tok_s or 0.0) * step.window_s
    cpu_per_1m = None
    if window.cpu_s is not None and out_tokens_window > 0:
        cpu_per_1m = window.cpu_s * (step.window_s / seconds) / out_tokens_window * 1e6
    server_p50 = server_p99 = read_p50 = read_p99 = None
    trace_dir = os.environ.get("RAMP_TRACE_DIR")
    if handle is not None:
        truth = handle.ground_truth()
        server_p50, server_p99 = _server_ttft(truth, window.start_ns)
        if trace_dir:
            read_p50, read_p99 = _read_delays(truth, window.start_ns, trace_dir)
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


def format_rows(rows: list[SelftestRow]) -> str:
    def f(v: float | None, fmt: str) -> str:
        return "n/a" if v is None else format(v, fmt)

    lines = [
        f"{'workers':>7} {'streams':>7} {'out tok/s':>10} {'ideal':>10} {'achieved/ideal':>14} "
        f"{'CPU-s/1M tok':>12} {'TTFT err p50':>12} {'TTFT err p99':>12} {'sim TTFT p50/p99':>16} {'loop lag max':>12} "
        f"{'client-bound':>12} {'ok':>6} {'err':>4}"
    ]
    for r in rows:
        lines.append(
            f"{r.workers:>7} {r.streams:>7} {r.out_tok_s:>10,.0f} {r.ideal_tok_s:>10,.0f} {r.ratio:>14.3f} "
            f"{f(r.cpu_s_per_1m, '.1f'):>12} {f(r.ttft_err_p50_ms, '.1f'):>9} ms {f(r.ttft_err_p99_ms, '.1f'):>9} ms "
            f"{f(r.server_ttft_p50_ms, '.1f'):>7}/{f(r.server_ttft_p99_ms, '.1f'):<5} ms "
            f"{f(r.read_delay_p50_ms, '.2f'):>8}/{f(r.read_delay_p99_ms, '.2f'):<6} ms {f(r.loop_lag_ms_max, '.1f'):>9} ms "
            f"{'YES' if r.client_bound else 'no':>12} {r.requests:>6} {r.errors:>4}"
        )
    return "\n".join(lines)


def selftest_main(args: argparse.Namespace) -> int:
    from loadgen.sim import build_config, spawn_sim_process

    try:
        streams = [int(s) for s in str(args.streams).split(",") if s]
        workers = [int(w) for w in str(args.workers).split(",") if w]
    except ValueError:
        print("ramp selftest: --streams and --workers take numbers separated by commas", file=sys.stderr)
        return 2
    ncpu = os.cpu_count() or 1
    handle = spawn_sim_process(build_config("fast"))
    sim_cpu = ncpu - 1
    client_cpus = ",".join(str(c) for c in range(max(1, ncpu - 1))) if ncpu > 1 else "0"
    if ncpu > 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(handle.pid, {sim_cpu})
    os.environ["RAMP_WORKER_CPUS"] = client_cpus
    import tempfile

    os.environ["RAMP_TRACE_DIR"] = tempfile.mkdtemp(prefix="ramp-selftest-")
    print(
        f"ramp selftest: simulator 'fast' (TTFT {TTFT_MS:.0f} ms, {TPOT_MS:.0f} ms/token, {OUTPUT_TOKENS} tokens) "
        f"on CPU {sim_cpu}, load workers on CPU {client_cpus}, transport {args.transport}, "
        f"{args.seconds:.0f} s measured per row",
        flush=True,
    )
    rows: list[SelftestRow] = []
    try:
        for w in workers:
            for s in streams:
                rows.append(
                    run_one(
                        handle.url, s, w, args.seconds, warmup=3.0, transport=args.transport, handle=handle
                    )
                )
                print(
                    format_rows(rows[-1:]).splitlines()[-1] if len(rows) > 1 else format_rows(rows),
                    flush=True,
                )
    finally:
        handle.stop()
    return 0
