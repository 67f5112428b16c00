"""``ramp run --headless --open-loop --find-max LO:HI`` (issue 32): the search over a request rate, a continuous
range bisected to ``RATE_RESOLUTION`` (5 %), against a server of known capacity.

The server is the simulator with 4 slots (``max_num_seqs``) and exact timing (every engine step 10 ms
whatever the batch), each request 50 output tokens: a slot serves a request in about 0.5 s, so the server's
capacity is about 4 / 0.5 = 8 req/s (400 out tok/s). Arrivals are evenly spaced (``--arrival constant``):
below the capacity a request never waits (TTFT about two steps), past it the queue grows without end and
TTFT p95 passes the SLO's 300 ms within a probe (at 5 % past it, the queue grows by 0.4 requests a second: a
wait of a slot's 0.5 s over a 3-s probe). So the answer lies near 8 req/s, a little past it at most. The range
3:13 holds a rate 1.5 times the capacity (probed second, as the high bound); probes of up to 5 s end as soon
as their intervals decide (a 3-s probe's 10-20 requests never decide a p95: each level then took 3 probes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.cli.commands import main
from loadgen.record import read_record
from loadgen.run.search import RATE_RESOLUTION
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost

EXACT = StepCost(10.0, 0.0, 0.0, ((0, 10.0), (1 << 20, 10.0)), spec_draft_ms=0.0)
SLOTS, SERVICE_S = 4, 0.5
CAPACITY = SLOTS / SERVICE_S  # req/s
pytestmark = pytest.mark.sim(
    "tiny-cpu",
    seed=5,
    max_num_seqs=SLOTS,
    cost=EXACT,
    kv_capacity_tokens=1 << 22,
    max_model_len=4096,
    process=True,
)
PROFILE = 'name = "slots"\n[[bucket]]\ninput = 16\noutput = 50\n[sampling]\nignore_eos = true\n[slo]\nttft_p95_ms = 300\n'


def test_the_search_over_a_rate_finds_the_servers_capacity(
    sim: ProcessSimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile, out = tmp_path / "slots.toml", tmp_path / "run.jsonl"
    profile.write_text(PROFILE)
    code = main(
        [
            "run", sim.url, "--headless", "--profile", str(profile), "--open-loop", "--arrival", "constant",
            "--find-max", "3:13", "--step-seconds", "5", "--warmup", "0.5", "--out", str(out), "--no-metrics",
        ]
    )  # fmt: skip
    line = [x for x in capsys.readouterr().err.splitlines() if x.startswith("ramp: ")][-1]
    assert code in (0, 1), line  # an answer, not a usage error (open loop took --find-max without --rate)
    record = read_record(out)
    (event,) = [e for e in record.events if e.get("kind") == "find_max"]
    met, missed = event["bracket"]["met"], event["bracket"]["missed"]
    # the answer: near the capacity (a shared machine may slow the simulator; a probe's few seconds let a
    # rate a little past it meet)
    assert 0.6 * CAPACITY <= met <= 1.25 * CAPACITY, event["summary"]
    assert line.startswith(f"ramp: max {met:g} req/s"), line
    # bisected on a continuous range to the resolution: the highest rate decided met and the lowest above it
    # decided missed lie within 5 % of each other, and the rates probed are not whole numbers
    levels = {d["level"]: d for d in event["levels"]}
    passed = max(x for x, d in levels.items() if d["met"])
    failed = min(x for x, d in levels.items() if not d["met"] and x > passed)
    assert failed <= passed * RATE_RESOLUTION + 1e-6, levels
    assert missed is not None and met < missed, event["bracket"]
    assert any(x != int(x) for x in levels), levels
    # each probe measured under its own rate: every rate well past the capacity missed, and every one well
    # below it met, those probed right after an overload included (the queue its close left is served first)
    for x, d in levels.items():
        if x >= 1.5 * CAPACITY:
            assert not d["met"], d
        if x <= 0.75 * CAPACITY:
            assert d["met"], levels
    steps = {s["step"]: s for s in record.steps}
    probes: list[dict[str, float]] = event["probes"]
    after_overload = [p for p, q in zip(probes[1:], probes[:-1], strict=True) if q["level"] >= 1.5 * CAPACITY]
    assert after_overload and all(steps[p["step"]]["settling_s"] > 0 for p in after_overload), after_overload
    assert all(steps[p["step"]]["rate_rps"] == p["level"] for p in probes)
