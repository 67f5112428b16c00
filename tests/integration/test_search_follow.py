"""The knee, followed (issue 32): a search started as the console's ``f`` does, against a simulator with a
known knee, holds its answer and judges the held steps; the simulator's slots drop mid-run (``POST
/_sim/slots``) and the held step misses: the run says the knee moved, with the evidence, and finds the new
one without the operator.

The server is ``benchmarks/bench_knee.py``'s: every engine step exactly 10 ms, at most 4 sequences running,
requests of 20 to 40 output tokens. Up to 4 streams a request starts at once (TTFT p95 ~20 ms), so a search
over 2:4 answers 4 (the upper bound met too); at 2 slots 3 streams already wait for a slot (TTFT p95 past
the 100-ms SLO) and 2 do not: the followed knee moves to 2.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.run.protocol import StartSearch
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost
from loadgen.snapshot import Snapshot
from loadgen.types import Target

EXACT = StepCost(10.0, 0.0, 0.0, ((0, 10.0), (1 << 20, 10.0)), spec_draft_ms=0.0)
PROFILE = """
name = "slots"
[[bucket]]
input = 16
output = { min = 20, max = 40 }
[sampling]
ignore_eos = true
[slo]
ttft_p95_ms = 100
"""

pytestmark = pytest.mark.sim(
    "tiny-cpu",
    seed=2,
    max_num_seqs=4,
    cost=EXACT,
    kv_capacity_tokens=1 << 22,
    max_model_len=4096,
    process=True,
)


def until(snaps: queue.Queue[Snapshot], done: Callable[[Snapshot], bool], deadline: float) -> Snapshot:
    """The first snapshot published for which ``done`` holds (by ``deadline`` on the monotonic clock)."""
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "not in time"
        try:
            snap = snaps.get(timeout=left)
        except queue.Empty:
            continue
        assert snap.state != "failed", snap.message
        if done(snap):
            return snap


def events(out: Path, kind: str) -> list[dict[str, Any]]:
    read = [json.loads(line) for line in out.read_text().splitlines()]
    return [x for x in read if x.get("type") == "event" and x.get("kind") == kind]


def follow_run(sim: ProcessSimHandle, out: Path, step_s: float) -> tuple[Engine, queue.Queue[Snapshot]]:
    """The console's run, started: level 1, idle after its plan, ``step_s`` a probe's longest and a held
    step's length; its snapshots queued."""
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<slots>"),
        level=1,
        out=str(out),
        telemetry=False,
        seed=2,
        after_plan="idle",
        auto_step_s=step_s,
        warmup_s=0.3,
    )
    snaps: queue.Queue[Snapshot] = queue.Queue()
    engine = Engine(config, on_snapshot=snaps.put)
    engine.start()
    return engine, snaps


@pytest.mark.slow
def test_the_followed_knee_moves_when_the_servers_slots_drop(sim: ProcessSimHandle, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    deadline = time.monotonic() + 60.0
    engine, snaps = follow_run(sim, out, 4.0)
    try:
        until(snaps, lambda s: s.state == "running", deadline)
        engine.send(StartSearch(2.0, 4.0))
        first = until(snaps, lambda s: s.search is not None and s.search.state == "following", deadline)
        assert first.search is not None and first.search.level == 4.0
        assert sim.set_slots(2) == {"max_num_seqs": 2, "was": 4}  # the server slows under the held knee
        refound = until(
            snaps,
            lambda s: s.search is not None and s.search.state == "following" and s.search.level != 4.0,
            deadline,
        )
        assert refound.search is not None and refound.search.level == 2.0
    finally:
        engine.stop()
        assert engine.wait(timeout=15) is not None
    actions = [e["action"] for e in events(out, "search")]
    assert actions[:4] == ["start", "done", "moved", "done"]
    moved = events(out, "search")[2]
    assert moved["level"] == 4.0 and moved["bounds"] == [1.0, 4.0]
    assert moved["figure"] == "TTFT p95" and moved["interval"][0] > moved["limit"] == 100.0
    steps = {
        s["step"]: s for s in (json.loads(x) for x in out.read_text().splitlines()) if s.get("type") == "step"
    }
    held = steps[moved["held_step"]]
    assert held["level"] == 4 and held["slo_met"] is False  # a step of its own at the knee, not a probe's
    before, after = events(out, "find_max")[:2]
    assert (before["max_level"], after["max_level"]) == (4.0, 2.0)
    assert after["probes"][0]["step"] == moved["held_step"]  # the held step was the new search's first probe


@pytest.mark.slow
def test_the_followed_knee_moves_up_when_the_server_gains_slots(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    """2 slots: the search over 1:4 answers 2 (3 streams wait for a slot), and the followed knee's held steps
    that meet are each followed by a probe of 3, which misses; the server gains 2 slots, the next probe of 3
    meets: the knee moved up, found again over 3:4 (the probe of 3 its first), and 4 is then followed."""
    sim.set_slots(2)
    out = tmp_path / "run.jsonl"
    deadline = time.monotonic() + 90.0
    engine, snaps = follow_run(sim, out, 5.0)
    try:
        until(snaps, lambda s: s.state == "running", deadline)
        engine.send(StartSearch(1.0, 4.0))
        first = until(snaps, lambda s: s.search is not None and s.search.state == "following", deadline)
        assert first.search is not None and first.search.level == 2.0
        until(snaps, lambda s: any(e["action"] == "above" for e in events(out, "search")), deadline)
        assert sim.set_slots(4) == {"max_num_seqs": 4, "was": 2}  # the server gains room above the knee
        refound = until(
            snaps,
            lambda s: s.search is not None and s.search.state == "following" and s.search.level == 4.0,
            deadline,
        )
        assert refound.search is not None
    finally:
        engine.stop()
        assert engine.wait(timeout=15) is not None
    searched = events(out, "search")
    (up,) = [e for e in searched if e["action"] == "moved"]
    assert up["direction"] == "up" and up["level"] == 3.0 and up["bounds"] == [3.0, 4.0]
    assert up["figure"] == "TTFT p95" and up["limit"] == 100.0
    assert (up["interval"][1] if up["interval"][1] is not None else up["largest"]) <= 100.0
    checks = [e for e in searched if e["action"] == "above"]
    assert checks and all(e["level"] == 3.0 and e["following"] == 2.0 for e in checks)
    steps = {
        s["step"]: s for s in (json.loads(x) for x in out.read_text().splitlines()) if s.get("type") == "step"
    }
    assert steps[up["probe_step"]]["level"] == 3 and steps[up["probe_step"]]["slo_met"] is True
    before, after = events(out, "find_max")[:2]
    assert (before["max_level"], after["max_level"]) == (2.0, 4.0)
    assert after["probes"][0]["step"] == up["probe_step"]  # the probe above was the new search's first
