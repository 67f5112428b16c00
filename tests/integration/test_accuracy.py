"""The client measures what the server did: measured TTFT, per-request decode tok/s, output tokens and the
aggregate tok/s against the simulator's ground truth, through the whole engine (controller, worker process,
deltas, record), at concurrency 1, 16 and 256.

Each run is one step without warm-up, ended by ``stop(cancel=False)`` so every request sent finishes and is
counted: the record's step and the simulator's ground truth then hold exactly the same requests.

The simulator's clock for a request starts once its HTTP server has parsed it, so every client TTFT also holds
the loopback HTTP legs (the client writing the request, the simulator's aiohttp dispatch, about 0.3 ms, the
first chunk travelling back). No client can remove those; the test measures them in the same run with bare
sequential requests through the same ``Client`` and adds them to the bound, so what is asserted is the
engine's own error.

At 256 streams the run starts with a warm-up: a cold start sends 256 requests at once, and opening 256
connections (client) and dispatching them one by one (the simulator is one Python process) are a burst that
warm-up exists to keep out of the figures. The latency figures cover the requests sent inside the
measurement window; the test joins them to the simulator's ground truth one by one through the
``X-Request-Id`` header (``RAMP_TRACE_DIR`` makes each worker write a line per request), so both sides hold
exactly the same requests. Aggregate tok/s is compared with the tokens the simulator emitted inside the same
window (each request's tokens spread evenly between its first and last token).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from snapshot_watch import Watch

from loadgen.client import Client
from loadgen.config import RampPlan
from loadgen.profile import Profile, parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle, build_config, spawn_sim_process
from loadgen.snapshot import StepSummary
from loadgen.types import Outcome, RequestSpec, Target

MODEL = "sim-llama-8b"

Trace = dict[str, Any]  # the line a worker writes per request under RAMP_TRACE_DIR (JSON)
Truth = dict[str, Any]  # the simulator's ground truth for one request (JSON)
# The symptoms the product names when it flags a step client-bound (loadgen.run.health.BoundJudge.reason).
CLIENT_BOUND_CAUSES = r"load worker at \d+% CPU|loop lag over \d+(\.\d+)? ms in \d+% of samples"


def _profile(input_tokens: int, output: str) -> Profile:
    text = f"""
name = "accuracy"
[[bucket]]
input = {input_tokens}
output = {output}
[sampling]
ignore_eos = true
"""
    return parse_profile(text, source="<accuracy>")


def _p50(values: list[float]) -> float:
    # The value below which half the samples lie, as an HDR histogram reports it (no interpolation).
    return float(np.percentile(np.asarray(values), 50, method="inverted_cdf"))


async def _bare_legs(url: str, n: int) -> list[tuple[int, int]]:
    """(client TTFT ns, client first token ns) of ``n`` sequential requests sent with the bare Client."""
    out = []
    async with Client(Target(url=url, model=MODEL), max_connections=4) as client:
        for i in range(n):
            spec = RequestSpec(
                api="chat",
                model=MODEL,
                max_tokens=2,
                messages=(("user", f"calibrate the loopback legs {i}"),),
                extra_body=(("ignore_eos", True),),
            )
            result = await client.send(spec, time.monotonic_ns())
            assert result.outcome is Outcome.OK, result.error_message
            assert result.first_token_ns is not None and result.ttft_ns is not None
            out.append((result.ttft_ns, result.first_token_ns))
    return out


def _http_legs_ms(sim: SimHandle, n: int = 15) -> float:
    """p50 of (client TTFT - truth TTFT) for bare sequential requests: the loopback HTTP legs."""
    before = len(sim.ground_truth())
    legs = asyncio.run(_bare_legs(sim.url, n))
    truth = sorted(sim.ground_truth()[before:], key=lambda g: g["first_token_ns"])
    assert len(truth) == n
    gaps = [
        (ttft - (g["first_token_ns"] - g["arrival_ns"])) / 1e6
        for (ttft, _), g in zip(legs, truth, strict=True)
    ]
    return _p50(gaps)


CASES = {
    # level: (sim overrides, prompt tokens, output distribution, warm-up s, finished requests to wait for)
    1: ({}, 32, "64", 0.0, 6),
    # Varied lengths: the 16 streams do not finish in the same engine step and then arrive together.
    16: ({}, 32, "{ min = 32, max = 96 }", 0.0, 64),
    # 256 streams: a quarter speed and 4 tokens a chunk keep the simulator near 1,000 chunks/s on 2 cores;
    # varied lengths spread the completions; the warm-up keeps the cold connection burst out.
    256: ({"speed": 0.25, "stream_interval": 4}, 8, "{ min = 24, max = 72 }", 3.0, 300),
}


@dataclass(frozen=True)
class Measured:
    """What one run left: the engine's summary of its one step, the record's line for it, every request's
    trace line, the simulator's truth by request id and its own lateness, and the bare loopback legs."""

    summary: StepSummary
    step: dict[str, Any]
    traced: list[Trace]
    truth_by_id: dict[str, Truth]
    info: dict[str, Any]
    legs_ms: float
    cuts: list[int]  # where the worker cut its windows, on its clock (a flush or the stop reaching it)


def _run_step(sim: SimHandle, level: int, tmp_path: Path) -> RunOutcome:
    """One step at ``level`` against ``sim``, stopped without cancelling once enough requests finished."""
    _, input_tokens, output, warmup_s, wait_ok = CASES[level]
    watch = Watch()
    config = RunConfig(
        target=Target(url=sim.url),
        profile=_profile(input_tokens, output),
        plan=RampPlan((level,), step_s=300.0, warmup_s=warmup_s),
        out=str(tmp_path / "run.jsonl"),
        telemetry=False,
    )
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        watch.until(lambda s: not s.warming_up and s.windows["step"].ok >= wait_ok, 90)
    finally:
        engine.stop(cancel=False)
        outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "stopped", outcome
    return outcome


def _measure(level: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Measured:
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    monkeypatch.setenv("RAMP_TRACE_DIR", str(trace_dir))
    monkeypatch.setenv("RAMP_TRACE_CHUNKS", "1")
    sim = spawn_sim_process(build_config("h200-llama8b", **CASES[level][0]))
    try:
        legs_ms = _http_legs_ms(sim)
        outcome = _run_step(sim, level, tmp_path)
        truth_by_id = {g["request_id"]: g for g in sim.ground_truth() if g.get("request_id")}
        info = sim.info()
    finally:
        sim.stop()

    assert len(outcome.steps) == 1
    record = read_record(tmp_path / "run.jsonl")
    step = record.steps[0]
    assert step["error_count"] == 0 and step["cancelled"] == 0
    lines = [
        json.loads(line) for path in trace_dir.glob("trace-*.jsonl") for line in path.read_text().splitlines()
    ]
    traced = [t for t in lines if "cut" not in t]
    cuts = [t for t in lines if "cut" in t]
    assert traced and all(t["outcome"] == "ok" for t in traced)
    return Measured(
        outcome.steps[0], step, traced, truth_by_id, info, legs_ms, sorted(c["at_ns"] for c in cuts)
    )


def _join(m: Measured) -> list[tuple[Trace, Truth]]:
    """Each request the step reports, with its ground truth."""
    t0, t1 = m.summary.window_t0_ns, m.summary.window_t1_ns
    # The requests the step reports: the ones its worker sent in the step's window (each trace line names
    # the window it was sent in). Every one is in the truth, with the same token counts.
    windows = Counter(t["window"] for t in m.traced if t0 <= t["intended_ns"] < t1)
    window = windows.most_common(1)[0][0]
    inside = [t for t in m.traced if t["window"] == window]
    assert all(t["request_id"] in m.truth_by_id for t in inside)
    pairs = [(t, m.truth_by_id[t["request_id"]]) for t in inside]
    assert m.summary.stats.pct("ttft_ms").count == len(pairs)
    assert m.step["ok"] == len(pairs)
    assert m.step["output_tokens"] == sum(g["output_tokens"] for _, g in pairs)
    assert all(t["output_tokens"] == m.truth_by_id[t["request_id"]]["output_tokens"] for t in m.traced)
    return pairs


@dataclass(frozen=True)
class Latencies:
    """The truth's TTFT and decode p50, the client's TTFTs (ms), and each client TTFT - truth TTFT taken
    apart: the client's send delay (intended -> sent), the request leg (sent -> the simulator's clock start:
    loopback + its HTTP dispatch) and the read delay (the simulator's write of the first token -> the
    client's stamp of it), all in ms."""

    ttft_truth: float
    decode_truth: float
    client_ttft: list[float]
    truth_ttft: np.ndarray  # each request's, ms (``ttft_truth`` is their p50)
    send_delay: np.ndarray
    request_leg: np.ndarray
    read_delay: np.ndarray


def _latencies(pairs: list[tuple[Trace, Truth]]) -> Latencies:
    return Latencies(
        ttft_truth=_p50([(g["first_token_ns"] - g["arrival_ns"]) / 1e6 for _, g in pairs]),
        decode_truth=_p50(
            [(g["output_tokens"] - 1) * 1e9 / (g["last_token_ns"] - g["first_token_ns"]) for _, g in pairs]
        ),
        client_ttft=[(t["first_token_ns"] - t["intended_ns"]) / 1e6 for t, _ in pairs],
        truth_ttft=np.asarray([(g["first_token_ns"] - g["arrival_ns"]) / 1e6 for _, g in pairs]),
        send_delay=np.asarray([(t["sent_ns"] - t["intended_ns"]) / 1e6 for t, _ in pairs]),
        request_leg=np.asarray([(g["arrival_ns"] - t["sent_ns"]) / 1e6 for t, g in pairs]),
        read_delay=np.asarray([(t["first_token_ns"] - g["first_token_ns"]) / 1e6 for t, g in pairs]),
    )


def _spread(first: int | None, last: int | None, n: int, t0: int, t1: int) -> float:
    """The tokens of a request inside [t0, t1): its first at its first token time, the other ``n - 1``
    spread evenly over its first..last token interval."""
    if first is None or n < 1:
        return 0.0
    inside = 1.0 if t0 <= first < t1 else 0.0
    if n > 1 and last is not None and last > first:
        inside += (n - 1) * max(0, min(last, t1) - max(first, t0)) / (last - first)
    return inside


@dataclass(frozen=True)
class Aggregates:
    """Aggregate tok/s over the step's window: from the chunks the client stamped, and from each side's
    tokens spread over first..last token."""

    arrived: float
    truth: float
    client_spread: float


def _aggregates(m: Measured) -> Aggregates:
    # Aggregate tok/s, in two exact links: (1) the engine's live count for the window equals the tokens whose
    # chunks the client stamped inside it (RAMP_TRACE_CHUNKS: every chunk's arrival; a chunk of k tokens
    # counts k, as usage says); (2) the client saw the simulator's tokens when it wrote them: the same
    # requests, token counts and first/last token times, so an even spread of each request's tokens over its
    # first..last token interval gives the same window total on both sides.
    t0, t1 = m.summary.window_t0_ns, m.summary.window_t1_ns
    window_s = (t1 - t0) / 1e9
    # The worker counts between its own cuts (the measuring flush and the stop, as they reached it), the step
    # divides by the controller's window: the same length, the edges late by the commands' delivery.
    c0 = min(m.cuts, key=lambda c: abs(c - t0))
    c1 = min((c for c in m.cuts if c > c0), key=lambda c: abs(c - t1))
    arrived = 0.0
    for t in m.traced:
        times = t["chunk_times_ns"]
        per_chunk = t["chunk_tokens"] or [t["output_tokens"] / max(1, len(times))] * len(times)
        arrived += sum(k for c, k in zip(times, per_chunk, strict=True) if c0 <= c < c1)
    truth = sum(
        _spread(g["first_token_ns"], g["last_token_ns"], g["output_tokens"], t0, t1)
        for g in m.truth_by_id.values()
    )
    client = sum(
        _spread(t["first_token_ns"], t["last_token_ns"], t["output_tokens"], t0, t1) for t in m.traced
    )
    return Aggregates(arrived / window_s, truth / window_s, client / window_s)


def _numbers(
    level: int, m: Measured, pairs: list[tuple[Trace, Truth]], lat: Latencies, aggs: Aggregates
) -> str:
    """The run's figures, printed and attached to every assertion."""
    step, info = m.step, m.info
    ttft, decode, agg = step["ttft_ms"]["p50"], step["decode_tok_s"]["p50"], step["out_tok_s"]
    send_delay, request_leg, read_delay = lat.send_delay, lat.request_leg, lat.read_delay
    return (
        f"level {level}: {len(pairs)} requests; TTFT p50 client {ttft:.3f} ms, truth {lat.ttft_truth:.3f} ms; "
        f"send delay p50 {np.percentile(send_delay, 50):.3f} max {send_delay.max():.3f} ms, request leg p50 {np.percentile(request_leg, 50):.3f} "
        f"ms (bare, idle: {m.legs_ms:.3f}), read delay p50 {np.percentile(read_delay, 50):.3f} p99 "
        f"{np.percentile(read_delay, 99):.3f} ms; truth + leg p50 "
        f"{np.percentile(lat.truth_ttft + request_leg, 50):.3f}, + read delay "
        f"{np.percentile(lat.truth_ttft + request_leg + read_delay, 50):.3f} ms; decode p50 client {decode:.2f}, truth {lat.decode_truth:.2f} tok/s; "
        f"aggregate client {agg:.1f} (stamped arrivals {aggs.arrived:.1f}), spread over first..last token: "
        f"client {aggs.client_spread:.1f}, truth {aggs.truth:.1f} tok/s over {step['window_s']} s; "
        f"client_bound={step['client_bound']}; sim steps_late={info['steps_late']} max_late_ms={info['max_late_ms']:.2f}"
    )


@pytest.mark.parametrize("level", sorted(CASES))
def test_measured_agrees_with_ground_truth(
    level: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = _measure(level, tmp_path, monkeypatch)
    pairs = _join(m)
    lat = _latencies(pairs)
    aggs = _aggregates(m)
    ttft, decode, agg = m.step["ttft_ms"]["p50"], m.step["decode_tok_s"]["p50"], m.step["out_tok_s"]
    read_delay = lat.read_delay
    numbers = _numbers(level, m, pairs, lat, aggs)
    print(numbers)

    # Bookkeeping, whatever the machine's load: the record's histogram holds exactly these requests' TTFTs
    # (HDR keeps 3 significant digits), and no client sees a token before the server wrote it (nor reads a
    # TTFT under the server's).
    assert ttft == pytest.approx(_p50(lat.client_ttft), rel=2e-3, abs=0.002), numbers
    assert read_delay.min() >= -0.05, numbers
    assert ttft >= lat.ttft_truth - 0.05, numbers
    if m.step["client_bound"]:
        # Other processes held the cores (a loaded CI box): the client's clock ran late, and the product must
        # say so, with the symptom that made it say so; its timings are then not held to the truth.
        reason = m.step.get("client_bound_reason", "")
        assert re.search(CLIENT_BOUND_CAUSES, reason), numbers + f"; reason {reason!r}"
        return
    # Not client-bound: the timings must then be the truth's. The step's tok/s is the tokens the client
    # stamped between its worker's cuts over the controller's window: the same length while the commands
    # that cut it arrive on time (a loaded box delivered them late: 1-8 % off, and client-bound).
    assert agg == pytest.approx(aggs.arrived, rel=0.01), numbers
    # Inter-token figures are differences of two arrival times: the HTTP legs cancel out.
    assert decode == pytest.approx(lat.decode_truth, rel=0.01), numbers
    # The client stamps a token within 1 ms of its write. At 256 streams the simulator writes a chunk to
    # every stream in one burst and one core reads them in turn (a few µs each: ~2 ms for the last of a
    # burst, measured); the tail also carries the two shared cores' scheduling.
    if level < 256:
        assert np.percentile(read_delay, 50) <= 1.0, numbers
    else:
        assert np.percentile(read_delay, 50) <= 3.0, numbers
        assert np.percentile(read_delay, 99) <= 15.0, numbers
    # It sends when it means to.
    assert np.percentile(lat.send_delay, 50) <= 1.0, numbers
    # So TTFT agrees with the truth within 1 ms or 1 %, beyond the request leg no client can remove (and, at
    # 256 streams, the burst's read delay): each request's truth plus its own leg is what a perfect client
    # would read, and the p50 is taken of those sums. (The p50 of the truths plus the p50s of the legs is the
    # p50 of nothing: at 256 streams beside two busy processes it failed 5 runs in 12; this passed 12 in 12.)
    unavoidable = lat.truth_ttft + lat.request_leg + (read_delay if level >= 256 else 0.0)
    assert ttft - float(np.percentile(unavoidable, 50)) <= max(1.0, 0.01 * lat.ttft_truth), numbers
    assert aggs.client_spread == pytest.approx(aggs.truth, rel=0.01), numbers
