"""Repeats and the SLA search through the engine against the steep simulator (decode step = 2 ms + 1 ms per
running sequence, so one stream decodes at about 1000 / (2 + B) tok/s with B streams running).

- ``--repeat N`` runs each level N times in a row, each repeat its own step line numbered ``repeat``.
- ``--find-max`` bisects to the highest concurrency whose (held) step meets the SLO. With B streams about
  B - 1 others decode beside a request (one is between requests or in prefill: measured 171 tok/s at 4
  streams, 24.2 at 40), so a stream decodes at about 1000 / (1 + B) tok/s: with "decode p50 at least
  105 tok/s" the knee is 8 streams (111 tok/s; 9 streams: 100 tok/s), 5 % either side.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.run.search import CONFIRM, Search
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost
from loadgen.types import Target

PROFILE = """
name = "steep-short"
description = "50 output tokens"
[[bucket]]
input = 16
output = 50
[sampling]
ignore_eos = true
[slo]
decode_p50_tok_s = 105
"""
STEEP = StepCost(2.0, 1.0, 0.0, ((0, 0.5), (128, 1.0)), spec_draft_ms=0.5)


pytestmark = pytest.mark.sim(
    "tiny-cpu",
    seed=3,
    max_num_seqs=256,
    cost=STEEP,
    kv_capacity_tokens=1 << 22,
    max_model_len=4096,
    process=True,
)


def run(
    sim: ProcessSimHandle, tmp_path: Path, **kwargs: object
) -> tuple[RunOutcome, list[dict[str, object]]]:
    out = tmp_path / "run.jsonl"
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<steep-short>"),
        out=str(out),
        telemetry=False,
        seed=21,
        **kwargs,  # type: ignore[arg-type]
    )
    engine = Engine(config)
    engine.start()
    outcome = engine.wait(180)
    assert outcome is not None and outcome.state == "finished", outcome
    return outcome, [json.loads(line) for line in out.read_text().splitlines()]


def test_each_level_runs_its_repeats_with_their_own_lines(sim: ProcessSimHandle, tmp_path: Path) -> None:
    outcome, lines = run(sim, tmp_path, plan=RampPlan((2.0, 4.0), step_s=1.5, warmup_s=0.3, repeat=2))
    steps = [line for line in lines if line.get("type") == "step"]
    assert [(s["step"], s["level"], s["repeat"]) for s in steps] == [
        (1, 2, 0),
        (2, 2, 1),
        (3, 4, 0),
        (4, 4, 1),
    ]
    header = lines[0]
    assert header["plan"]["repeat"] == 2  # type: ignore[index]


def test_the_search_finds_the_known_knee(sim: ProcessSimHandle, tmp_path: Path) -> None:
    outcome, lines = run(
        sim, tmp_path, plan=RampPlan((2.0,), step_s=2.5, warmup_s=0.5), level=2, find_max=(2.0, 32.0)
    )
    (event,) = [line for line in lines if line.get("type") == "event" and line.get("kind") == "find_max"]
    data = event
    # the model's knee (8); one below if this shared machine slowed the simulator by more than 5 %
    assert data["max_level"] in (7.0, 8.0), data  # type: ignore[index]
    # the bracket: the answer and the lowest level above it that missed, each side probed near the limit
    bracket = data["bracket"]
    assert bracket["met"] == data["max_level"] and bracket["missed"] == data["max_level"] + 1, bracket
    levels = {d["level"]: d for d in data["levels"]}
    assert levels[bracket["met"]]["met"] and not levels[bracket["missed"]]["met"]
    for side in (levels[bracket["met"]], levels[bracket["missed"]]):  # near the limit: probed again ...
        # ... unless its intervals decided it (an outcome that cannot flip is not probed again)
        assert side["sure"] or side["probes"] >= (2 if abs(side["margin"]) < CONFIRM else 1), side
    assert data["knee"]["bracket"] == [bracket["met"], bracket["missed"]]  # the monotone fit's knee
    assert data["knee"]["shape"] == "slope"  # decode speed falls steadily with load: no cliff
    probes = data["probes"]
    for i, p in enumerate(probes):  # a level probed again says why; a first probe has nothing to say
        assert bool(p["why"]) == any(q["level"] == p["level"] for q in probes[:i]), p
    probes = data["probes"]
    # from the middle of 2:32 (a bound is probed only when the bisection reaches it): 17, 9, 5, 7, 8 ...
    assert probes[0]["level"] == 17 and 2.0 not in [p["level"] for p in probes] and len(probes) <= 12
    steps = [line for line in lines if line.get("type") == "step"]
    assert len(steps) == len(probes) and all(s["closing_s"] >= 0 for s in steps)
    # each probe names its step line (counted from 1), at its level, with that line's verdict
    by_number = {s["step"]: s for s in steps}
    for probe in probes:
        line = by_number[probe["step"]]
        assert line["level"] == probe["level"] and line["slo_met"] is probe["met"]
    assert by_number[data["step"]]["level"] == data["max_level"]
    assert outcome.message.startswith(f"max {data['max_level']:g} streams")  # type: ignore[index]
    assert f"between {data['max_level']:g} (met) and {bracket['missed']:g} (missed)" in outcome.message


def test_a_probe_ends_as_soon_as_its_intervals_decide(sim: ProcessSimHandle, tmp_path: Path) -> None:
    """Far from the knee a probe is decided long before its maximum: 17 streams (the middle of 2:32, probed
    first) miss the decode-speed SLO by about 45 %, 5 meet it by about 55 %; both end once their intervals
    decide (2 to 4 s of window), and the search's 12-s maximum is used only near the knee."""
    _, lines = run(
        sim, tmp_path, plan=RampPlan((2.0,), step_s=12.0, warmup_s=0.5), level=2, find_max=(2.0, 32.0)
    )
    steps = {s["level"]: s for s in lines if s.get("type") == "step"}
    for level in (17, 5):
        assert steps[level]["ended_by"] == "decided" and steps[level]["window_s"] < 8.0, steps[level]
    (data,) = [line for line in lines if line.get("type") == "event" and line.get("kind") == "find_max"]
    # Decided on the search's live rule (an interval not trusted decides only a factor of 2 past the limit);
    # the step's verdict is then read on all its requests, the close's included, which on a loaded box can
    # widen it past the limit: undecided, and the level probed again. Never the other side.
    verdicts = {lv: {p["verdict"] for p in data["probes"] if p["level"] == lv} for lv in (17.0, 5.0)}
    assert verdicts[17.0] <= {"missed", "undecided"} and verdicts[5.0] <= {"met", "undecided"}, data["probes"]
    assert data["max_level"] in (7.0, 8.0), data


def test_the_search_honours_repeat(sim: ProcessSimHandle, tmp_path: Path) -> None:
    """--repeat 2 --find-max: every level is probed at least twice and decided on the median; each probe's
    step line says which repeat of its level it is."""
    _, lines = run(
        sim,
        tmp_path,
        plan=RampPlan((4.0,), step_s=1.5, warmup_s=0.3, repeat=2),
        level=4,
        find_max=(6.0, 10.0),
    )
    (data,) = [line for line in lines if line.get("type") == "event" and line.get("kind") == "find_max"]
    assert data["repeat"] == 2 and data["max_level"] in (7.0, 8.0, 9.0), data
    assert data["bracket"]["missed"] == data["max_level"] + 1
    steps = [line for line in lines if line.get("type") == "step"]
    for decided in data["levels"]:
        at = [s for s in steps if s["level"] == decided["level"]]
        assert decided["probes"] == len(at) >= 2
        assert [s["repeat"] for s in at] == list(range(len(at)))


def test_bisection_logic_without_a_server() -> None:
    search = Search(1.0, 100.0, integer=True)
    knee = 37
    level: float | None = search.first()
    seen = []
    while level is not None:
        seen.append(level)
        met = level <= knee
        level = search.probe_result(level, met)
    assert search.passed == knee and search.failed == knee + 1 and len(seen) <= 9


def test_goodput_counts_the_requests_that_met_the_per_request_limits(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    # decode p50 >= 105 tok/s: every request at 4 streams (about 200 tok/s) is good, none at 16 (about 59).
    outcome, lines = run(sim, tmp_path, plan=RampPlan((4.0, 16.0), step_s=2.0, warmup_s=0.3))
    low, high = [line for line in lines if line.get("type") == "step"]
    assert low["ok"] > 0 and low["goodput_req_s"] == pytest.approx(low["req_s"], rel=0.01)
    assert low["goodput_tok_s"] == pytest.approx(low["ok"] * 50 / low["window_s"], rel=0.01)
    assert high["ok"] > 0 and high["goodput_req_s"] == 0.0 and high["goodput_tok_s"] == 0.0


def test_a_request_is_good_when_it_meets_every_per_request_limit() -> None:
    from loadgen.config import SLO

    slo = SLO(ttft_p95_ms=500, decode_p50_tok_s=20, e2e_p95_s=10)
    assert slo.good(ttft_ms=100, decode_tok_s=30, e2e_ms=5000)
    assert not slo.good(ttft_ms=600, decode_tok_s=30, e2e_ms=5000)
    assert not slo.good(ttft_ms=100, decode_tok_s=10, e2e_ms=5000)
    assert not slo.good(ttft_ms=100, decode_tok_s=30, e2e_ms=11_000)
    assert not slo.good(ttft_ms=None, decode_tok_s=30, e2e_ms=5000)  # no first token: not good
    assert SLO(ttft_p99_ms=50).good(ttft_ms=40, decode_tok_s=None, e2e_ms=1e6)  # p99's limit without p95's


def test_a_priced_run_records_each_steps_cost(sim: ProcessSimHandle, tmp_path: Path) -> None:
    """Cost is in the record, per step (issue 11): checked by hand against the step's own counts."""
    from loadgen.profile import Pricing

    pricing = Pricing(
        usd_per_1m_input=0.30,
        usd_per_1m_output=1.20,
        usd_per_1m_cache_read=0.03,
        gpu_usd_per_hour=3.6,
        gpus=2,
    )
    _, lines = run(sim, tmp_path, plan=RampPlan((2.0,), step_s=1.5, warmup_s=0.3), pricing=pricing)
    (step,) = [line for line in lines if line.get("type") == "step"]
    cost = step["cost"]
    assert isinstance(cost, dict) and cost["task"] == "request"
    # GPU hours: $3.60 x 2 GPUs = $0.002 per second of the step's window
    assert cost["gpu"]["usd"] == pytest.approx(0.002 * step["stats_duration_s"], rel=1e-6)
    assert cost["gpu"]["per_1m_output"] == pytest.approx(0.002 / step["out_tok_s"] * 1e6, rel=1e-6)
    # the token bill: uncached prompt tokens at $0.30, cached at $0.03, output at $1.20 per 1M
    uncached, cached = step["input_tokens"] - step["cached_tokens"], step["cached_tokens"]
    bill = (uncached * 0.30 + cached * 0.03 + step["output_tokens"] * 1.20) / 1e6
    assert cost["tokens"]["usd"] == pytest.approx(bill, rel=1e-6)
    assert cost["tokens"]["per_task"] == pytest.approx(bill / step["ok"], rel=1e-6)
