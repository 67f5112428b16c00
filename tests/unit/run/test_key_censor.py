"""A step a key cut is read again on its requests done before the key, the ones the key caught censored
there (``loadgen.run.censor``, issue 32): it may be the best step only when that reading keeps its verdict.
On the fake fleet and clock of ``test_wheel``: the step lines' ``before_key``, ``clean`` and the best step."""

from __future__ import annotations

import json
from pathlib import Path

from run_fakes import FakeClock, FakeFleet, controller, tick

from loadgen.config import SLO, RampPlan
from loadgen.record import step_from_line
from loadgen.run.controller import Controller
from loadgen.run.protocol import SetLevel
from loadgen.snapshot import StepSummary


def cut_step(
    slo: SLO | None, carried_e2e_s: float, record: Path | None = None
) -> tuple[StepSummary, Controller]:
    """3 s of level 4 (2 requests of 1 s a second), `l 16`, then the 3 requests the key caught finish, each
    ``carried_e2e_s`` long (slow: they ran under 16 streams)."""
    extra: dict[str, object] = {} if slo is None else {"slo": slo}
    ctl, fleet, clock, _ = controller(
        plan=RampPlan((4.0,), step_s=60.0, warmup_s=0.0), record=record, **extra
    )
    ctl.start_load()
    measure(ctl, fleet, clock)
    cut_window = fleet.window[0]
    ctl.command(SetLevel(16))
    clock.advance(0.2)
    fleet.ship(ok=1, in_flight=3, window=cut_window, e2e_s=1.0)  # shipped at the cut: done under level 4
    tick(ctl)
    clock.advance(1.0)
    fleet.ship(ok=3, in_flight=0, window=cut_window, closed=True, e2e_s=carried_e2e_s)
    tick(ctl)
    (step,) = ctl.steps.summaries
    return step, ctl


def measure(ctl: Controller, fleet: FakeFleet, clock: FakeClock) -> None:
    for _ in range(3):
        clock.advance(1.0)
        fleet.ship(ok=2, in_flight=4, e2e_s=1.0)
        tick(ctl)


def test_carried_requests_that_would_change_the_verdict_keep_the_step_from_best() -> None:
    step, ctl = cut_step(SLO(e2e_p95_s=2.0), carried_e2e_s=9.0)
    assert step.stats.ok == 10 and step.carried_share == 0.3
    # On all 10 requests e2e p95 is a carried one's 9 s: missed; on the 7 done before the key, 1 s: met.
    assert step.verdict.met is False
    reading = step.before_key
    assert (reading["ok"], reading["carried"], reading["slo_met"], reading["agrees"]) == (7, 3, True, False)
    assert 950 <= float(str(reading["e2e_ms_p95"])) <= 1050
    assert (step.stats.pct("e2e_ms").p95 or 0) > 8000
    assert not step.clean and ctl.steps.best is None


def test_carried_requests_that_keep_the_verdict_leave_the_step_clean() -> None:
    step, _ = cut_step(SLO(e2e_p95_s=20.0), carried_e2e_s=9.0)
    assert step.verdict.met is True
    assert (step.before_key["slo_met"], step.before_key["agrees"]) == (True, True)
    assert step.clean  # eligible; whether it is the best is then its intervals' say (``slo.eligible``)


def test_a_step_whose_reading_holds_no_request_is_not_clean() -> None:
    """Every request still in flight at the key: nothing was done under its level alone."""
    ctl, fleet, clock, _ = controller(plan=None, level=4)
    ctl.start_load()
    for _ in range(2):
        clock.advance(1.0)
        fleet.ship(ok=0, in_flight=4)
        tick(ctl)
    cut_window = fleet.window[0]
    ctl.command(SetLevel(8))
    clock.advance(0.2)
    fleet.ship(ok=0, in_flight=4, window=cut_window)
    tick(ctl)
    clock.advance(1.0)
    fleet.ship(ok=4, in_flight=0, window=cut_window, closed=True)
    tick(ctl)
    (step,) = ctl.steps.summaries
    assert step.carried_share == 1.0 and step.before_key["ok"] == 0 and step.before_key["agrees"] is False
    assert not step.clean and ctl.steps.best is None


def test_the_record_keeps_the_reading_and_a_planned_step_has_none(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    step, _ = cut_step(None, carried_e2e_s=9.0, record=record)
    (line,) = [json.loads(t) for t in record.read_text().splitlines() if '"type":"step"' in t]
    assert line["ended_by"] == "level" and line["carried_share"] == 0.3
    assert line["before_key"] == dict(step.before_key) and line["before_key"]["ok"] == 7
    back = step_from_line(line)
    assert back.before_key == step.before_key and back.clean
    planned = {k: v for k, v in line.items() if k != "before_key"} | {"carried_share": 0.0}
    assert step_from_line(planned).before_key == {} and step_from_line(planned).clean
