"""Step bookkeeping without processes: a window opened by ``begin``, deltas folded into it, fixed by
``end`` (a ``StepEnd`` declared up front, never attributes added later), reported in order."""

from __future__ import annotations

import time

import pytest

from loadgen.config import SLO
from loadgen.metrics import Accumulator, IntervalDelta, Recorder
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.fleet import ProcessFleet
from loadgen.run.state import Load
from loadgen.run.steps import Segment, Steps
from loadgen.run.telemetry_link import TelemetryLink
from loadgen.types import Outcome, RequestResult, Target

PROFILE = parse_profile("[[bucket]]\ninput = 16\noutput = 4\n", source="<steps>")


def _steps(level: int, warmup_s: float = 0.0) -> Steps:
    config = RunConfig(
        target=Target(url="http://127.0.0.1:9"), profile=PROFILE, level=level, warmup_s=warmup_s
    )
    # A fleet that never spawned: commands go nowhere, no worker is waited for.
    return Steps(Load.of(config), ProcessFleet(config), TelemetryLink(), time.monotonic_ns())


def _delta(ok: int) -> IntervalDelta:
    recorder = Recorder(worker_id=0)
    now = time.monotonic_ns()
    for _ in range(ok):
        recorder.record(
            RequestResult(
                outcome=Outcome.OK,
                intended_ns=now - 2_000_000,
                sent_ns=now - 2_000_000,
                end_ns=now,
                first_token_ns=now - 1_000_000,
                last_token_ns=now,
                chunk_times_ns=(now - 1_000_000, now),
                output_tokens=4,
                tokens_exact=True,
            )
        )
    return recorder.take(now - 250_000_000, now)


def test_a_segment_takes_no_attribute_it_does_not_declare() -> None:
    seg = Segment(0, 0, "measure", 0, Accumulator(), pending=set())
    with pytest.raises(AttributeError):
        object.__setattr__(seg, "closing", True)


def test_a_step_is_folded_ended_and_reported() -> None:
    steps = _steps(level=3)
    steps.begin()
    cur = steps.current
    assert cur is not None and cur.phase == "measure" and steps.measuring_since_ns() == cur.t0_ns
    steps.fold(0, cur.seg_id, _delta(ok=5), closed=False, current=True)
    steps.marks.append("note")
    steps.end("next")
    assert steps.current is None and cur.end is not None
    assert (cur.end.ended_by, cur.end.level, cur.end.mode, cur.end.marks) == ("next", 3, "closed", ("note",))
    (ready,) = steps.complete()
    summary = steps.summarize(ready, SLO())
    assert summary is not None and summary.stats.ok == 5 and summary.level == 3 and summary.ended_by == "next"
    assert steps.summaries == [summary] and steps.best == 0
    assert steps.run_acc.stats("run", 1.0).ok == 5


def test_a_moment_between_two_key_presses_is_not_a_step() -> None:
    steps = _steps(level=1)
    steps.begin()
    assert steps.end("level") is None  # decided at the cut: it takes no index and leaves no boundary
    assert steps.complete() == [] and steps.summaries == [] and steps.index == 0 and steps.starts_s == []


def test_warmup_is_never_reported() -> None:
    steps = _steps(level=1, warmup_s=0.01)
    steps.begin()
    warm = steps.current
    assert warm is not None and warm.phase == "warmup" and steps.warming_up
    steps.end_warmup(steps.warm_end_ns)
    assert steps.current is not None and steps.current.phase == "measure"
    assert warm.seg_id not in steps.segments
