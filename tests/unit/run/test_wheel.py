"""The step state machine (``run/controller.py``, ``run/wheel.py``, ``run/steps.py``) on a fake fleet and a
fake clock: warm-up excluded, a planned step closing under its own load, settling after a lowering, a key's
cut and what it carried, a moment that is no step, repeats, find-max decisions and mode switches — each
checked on the step lines and their figures, and on the load commands the workers were sent.
"""

from __future__ import annotations

import json
from pathlib import Path

from run_fakes import FakeClock, FakeFleet, S, controller, tick
from telemetry_fakes import FakeSource

from loadgen.config import SLO, RampPlan
from loadgen.run.controller import Controller
from loadgen.run.protocol import ClosedLoad, Flush, NextStep, OpenLoad, Pause, Resume, SetLevel, SetMode
from loadgen.telemetry import Reading, TelemetryHub


def test_a_planned_step_excludes_its_warm_up_and_closes_under_its_own_load(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0, 8.0), step_s=5.0, warmup_s=1.0), record=record)
    ctl.start_load()
    assert fleet.loads() == [ClosedLoad(4, False)]
    assert ctl.wheel.phase() == "warmup"
    clock.advance(0.5)
    fleet.ship(ok=3, in_flight=4, e2e_s=9.0)  # warm-up requests: never in the step's figures
    tick(ctl)
    clock.advance(0.5)
    tick(ctl)
    assert ctl.wheel.phase() == "measure"
    for _ in range(4):  # the window: 1 s to 5 s after the step began
        clock.advance(1.0)
        fleet.ship(ok=2, in_flight=4, e2e_s=1.0)
        tick(ctl)
    assert ctl.wheel.phase() == "closing"
    assert fleet.loads() == [ClosedLoad(4, False)]  # the load holds while the step's requests finish
    assert ctl.steps.summaries == []
    assert ctl.steps.closing is not None
    measured = ctl.steps.closing.seg_id  # the window the worker shipped into; a flush moved it on at the end
    assert fleet.window[0] != measured
    clock.advance(0.5)
    fleet.ship(ok=4, in_flight=0, window=measured, closed=True, e2e_s=1.5)
    tick(ctl)
    (step,) = ctl.steps.summaries
    assert (step.index, step.level, step.mode, step.ended_by) == (0, 4, "closed", "plan")
    assert (step.warmup_s, step.window_s, step.duration_s, step.closing_s) == (1.0, 4.0, 5.0, 0.5)
    assert step.stats.ok == 12 and step.carried_share == 0.0
    assert step.stats.pct("e2e_ms").p95 is not None and step.stats.pct("e2e_ms").p95 < 2000  # no 9 s warm-up
    assert fleet.loads() == [ClosedLoad(4, False), ClosedLoad(8, False)]  # the next level, only now
    assert ctl.wheel.phase() == "warmup" and ctl.steps.index == 1
    (line,) = [json.loads(t) for t in record.read_text().splitlines() if '"type":"step"' in t]
    assert (line["step"], line["level"], line["ended_by"], line["window_s"], line["closing_s"]) == (
        1,  # the record counts steps from 1, as the screen
        4,
        "plan",
        4.0,
        0.5,
    )


def _measure(
    ctl: Controller, fleet: FakeFleet, clock: FakeClock, seconds: int, ok: int = 2, in_flight: int = 4
) -> None:
    """``seconds`` of load: a delta a second from the worker, each followed by a turn of the loop."""
    for _ in range(seconds):
        clock.advance(1.0)
        fleet.ship(ok=ok, in_flight=in_flight)
        tick(ctl)


def test_a_key_cuts_the_step_at_once_and_the_step_says_what_it_carried() -> None:
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0, 8.0), step_s=60.0, warmup_s=0.0))
    ctl.start_load()
    _measure(ctl, fleet, clock, 3, ok=2, in_flight=4)
    cut_window = fleet.window[0]
    ctl.command(SetLevel(16))
    assert fleet.loads()[-1] == ClosedLoad(16, False)  # at once, not at the step's end
    assert not ctl.load.auto and ctl.load.plan is None
    assert [text for _, text in ctl.wheel.notices] == ["auto-ramp off — a to resume"]
    assert ctl.steps.summaries == []  # reported once its requests are done
    clock.advance(0.2)
    fleet.ship(ok=1, in_flight=3, window=cut_window)  # the first figures after the cut: 3 still running
    tick(ctl)
    clock.advance(1.0)
    fleet.ship(ok=3, in_flight=0, window=cut_window, closed=True)
    tick(ctl)
    (step,) = ctl.steps.summaries
    assert (step.level, step.ended_by, step.window_s) == (4, "level", 3.0)
    assert step.stats.ok == 10 and step.carried_share == 0.3  # 3 of its 10 requests ran into level 16
    # Read again on the 7 requests done before the key (issue 32): no SLO, so the carried 3 decide nothing
    assert (step.before_key["ok"], step.before_key["carried"], step.before_key["agrees"]) == (7, 3, True)
    assert step.clean and ctl.steps.best == 0
    assert ctl.steps.level == 16 and ctl.steps.index == 1


def test_a_key_within_a_second_of_the_last_makes_no_step() -> None:
    ctl, fleet, clock, _ = controller(plan=None, level=4)
    ctl.start_load()
    _measure(ctl, fleet, clock, 2)
    first = fleet.window[0]
    ctl.command(SetLevel(5))
    clock.advance(0.5)
    ctl.command(SetLevel(6))  # 0.5 s at level 5: no step, no index
    clock.advance(1.0)
    fleet.ship(ok=2, in_flight=0, window=first, closed=True)
    tick(ctl)
    assert [(s.index, s.level, s.ended_by) for s in ctl.steps.summaries] == [(0, 4, "level")]
    assert ctl.steps.index == 1 and ctl.steps.level == 6
    assert [cmd.level for cmd in fleet.loads() if isinstance(cmd, ClosedLoad)] == [4, 5, 6]


def test_a_step_a_key_cut_under_a_second_is_dropped_with_a_word(tmp_path: Path) -> None:
    """Issue 30: the dropped step vanished without a word; it is said as a toast and a record warning."""
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock, _ = controller(plan=None, level=4, record=record)
    ctl.start_load()
    _measure(ctl, fleet, clock, 2)
    ctl.command(SetLevel(5))
    assert not any("dropped" in text for _, text in ctl.wheel.notices)  # a 2 s step is a step
    clock.advance(0.4)
    ctl.command(SetLevel(6))  # 0.4 s at level 5
    said = [text for _, text in ctl.wheel.notices if "dropped" in text]
    assert said == ["step 2 dropped: a key cut it 0.4 s into its window (under 1 s is no step)"]
    events = [json.loads(t) for t in record.read_text().splitlines() if '"type":"event"' in t]
    assert [e["note"] for e in events if e.get("kind") == "warning"] == said


def test_after_a_lowering_the_next_warm_up_waits_for_in_flight_to_come_down() -> None:
    ctl, fleet, clock, _ = controller(plan=None, level=8)
    ctl.start_load()
    _measure(ctl, fleet, clock, 2, ok=4, in_flight=8)
    windows_before = len([c for _, c in fleet.commands if isinstance(c, Flush)])
    ctl.command(SetLevel(2))
    assert ctl.wheel.phase() == "settling" and ctl.wheel.surplus() == 6
    assert fleet.loads()[-1] == ClosedLoad(2, False)
    clock.advance(0.5)
    fleet.ship(ok=3, in_flight=5)
    tick(ctl)
    assert ctl.wheel.phase() == "settling" and ctl.steps.current is None
    clock.advance(0.5)
    fleet.ship(ok=3, in_flight=2)
    tick(ctl)
    assert ctl.wheel.phase() == "measure" and ctl.steps.level == 2
    began = clock()
    flushes = [c for _, c in fleet.commands if isinstance(c, Flush)]
    assert len(flushes) == windows_before + 2  # the cut's in-between window, then the new step's
    assert flushes[-1].t0_ns == began  # the step begins once settled, not at the key


def test_repeats_are_each_their_own_step_line() -> None:
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0,), step_s=2.0, warmup_s=0.0, repeat=2))
    ctl.start_load()
    for repeat in range(2):
        _measure(ctl, fleet, clock, 2)
        assert ctl.steps.closing is not None
        fleet.ship(ok=4, in_flight=0, window=ctl.steps.closing.seg_id, closed=True)
        tick(ctl)
        assert len(ctl.steps.summaries) == repeat + 1
    assert [(s.index, s.level, s.repeat, s.ended_by) for s in ctl.steps.summaries] == [
        (0, 4, 0, "plan"),
        (1, 4, 1, "plan"),
    ]
    assert ctl.status.state == "finished"
    assert fleet.loads() == [ClosedLoad(4, False), ClosedLoad(4, False)]


def test_find_max_bisects_to_the_highest_level_that_meets_the_slo(tmp_path: Path) -> None:
    record = tmp_path / "search.jsonl"
    ctl, fleet, clock, _ = controller(
        plan=RampPlan((1.0,), step_s=2.0, warmup_s=0.0),
        level=1,
        find_max=(1.0, 16.0),
        slo=SLO(e2e_p95_s=2.0),
        record=record,
    )
    ctl.start_load()
    for _ in range(100):
        level = ctl.load.level
        e2e = 1.0 if level <= 6 else 3.0  # the server meets the SLO up to 6 streams
        clock.advance(1.0)
        # 40 requests a second: a 2-s step's e2e p95 is bounded from above (with 2 a second its 4 values
        # could not bound it: open above, undecided, probed again)
        fleet.ship(ok=40, in_flight=level, e2e_s=e2e)  # a lowering settles with this
        tick(ctl)
        closing = ctl.steps.closing
        if closing is not None:
            fleet.ship(ok=1, in_flight=0, window=closing.seg_id, closed=True, e2e_s=e2e)
            tick(ctl)
        if ctl.status.state != "running":
            break
    # from the middle of 1:16 (the bounds are probed only when the bisection reaches them)
    assert [s.level for s in ctl.steps.summaries] == [8, 4, 6, 7]
    assert [s.verdict.met for s in ctl.steps.summaries] == [False, True, True, False]
    assert ctl.status.message.startswith("max 6 streams")
    (event,) = [json.loads(t) for t in record.read_text().splitlines() if '"find_max"' in t]
    assert event["max_level"] == 6.0 and event["step"] == 3  # the 3rd step (the record counts from 1)


def test_a_mode_switch_keeps_the_ending_steps_mode_and_never_opens_at_zero() -> None:
    ctl, fleet, clock, _ = controller(plan=None, level=4)
    ctl.start_load()
    _measure(ctl, fleet, clock, 4, ok=3, in_flight=4)  # 3 sent a second
    first = fleet.window[0]
    ctl.command(SetMode("open"))
    load = fleet.loads()[-1]
    assert isinstance(load, OpenLoad) and load.arrivals.rate_rps > 0 and load.cap == 0
    assert ctl.load.mode == "open" and ctl.steps.mode == "open"
    assert any(f"open loop at {load.arrivals.rate_rps:g} req/s" in text for _, text in ctl.wheel.notices)
    clock.advance(1.0)
    fleet.ship(ok=4, in_flight=0, window=first, closed=True)
    fleet.ship(ok=2, in_flight=3)  # the open loop's requests in flight
    tick(ctl)
    (closed_step,) = ctl.steps.summaries
    assert (closed_step.mode, closed_step.level, closed_step.rate_rps, closed_step.ended_by) == (
        "closed",
        4,
        None,
        "mode",
    )
    clock.advance(2.0)
    fleet.ship(ok=2, in_flight=3)
    tick(ctl)
    open_window = fleet.window[0]
    ctl.command(SetMode("closed"))
    assert fleet.loads()[-1] == ClosedLoad(3, False)  # the open loop's in-flight count, not 0
    fleet.ship(ok=3, in_flight=0, window=open_window, closed=True)
    tick(ctl)
    open_step = ctl.steps.summaries[1]
    assert (open_step.mode, open_step.rate_rps, open_step.ended_by) == (
        "open",
        load.arrivals.rate_rps,
        "mode",
    )


def test_pause_cuts_the_step_and_resume_begins_a_new_one_at_the_same_level() -> None:
    ctl, fleet, clock, _ = controller(plan=None, level=4)
    ctl.start_load()
    _measure(ctl, fleet, clock, 2)
    first = fleet.window[0]
    ctl.command(Pause())
    assert ctl.status.state == "paused" and ctl.steps.current is None
    clock.advance(1.0)
    fleet.ship(ok=1, in_flight=0, window=first, closed=True)
    tick(ctl)
    ctl.command(Resume())
    assert ctl.status.state == "running" and ctl.steps.current is not None
    assert [(s.level, s.ended_by) for s in ctl.steps.summaries] == [(4, "pause")]
    assert fleet.loads()[-1] == ClosedLoad(4, False)


def test_next_step_moves_along_the_plan_and_says_when_there_is_none() -> None:
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0, 8.0), step_s=60.0, warmup_s=0.0))
    ctl.start_load()
    _measure(ctl, fleet, clock, 2)
    first = fleet.window[0]
    ctl.command(NextStep())
    assert fleet.loads()[-1] == ClosedLoad(8, False) and ctl.load.plan is not None
    _measure(ctl, fleet, clock, 2)
    ctl.command(NextStep())
    assert [text for _, text in ctl.wheel.notices][
        -1
    ] == "no next step (the plan's end, or the auto-ramp's ceiling): ↑/↓ or l set a level"
    fleet.ship(ok=1, in_flight=0, window=first, closed=True)
    tick(ctl)
    assert [(s.level, s.ended_by) for s in ctl.steps.summaries] == [(4, "next")]


def test_the_fake_clock_times_the_steps() -> None:
    ctl, _, clock, _ = controller(plan=None, level=4)
    assert ctl.status.t0_ns == clock() and clock() == 1000 * S


def test_a_closing_step_keeps_its_own_figures_and_number_on_the_snapshot() -> None:
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0, 8.0), step_s=3.0, warmup_s=0.0))
    ctl.start_load()
    _measure(ctl, fleet, clock, 3, ok=2, in_flight=4)
    assert ctl.steps.closing is not None
    held = ctl.steps.closing.seg_id
    clock.advance(0.3)
    fleet.ship(ok=1, in_flight=3, window=held)  # its last requests landing, one by one
    tick(ctl)
    snap = ctl.snapshots.build(clock(), ctl.status, ctl.load, ctl.steps, ctl.live, ctl.link, None, ctl.wheel)
    assert (snap.phase, snap.step_index, snap.level, snap.closing_left) == ("closing", 0, 4, 3)
    assert snap.windows["step"].ok == 7 and snap.windows["step"].duration_s == 3.0


def test_a_telemetry_page_dropped_mid_run_is_a_record_event_of_its_step_said_once(tmp_path: Path) -> None:
    """Issue 20.2's remainder: a /metrics that goes endless after a good start was only in the source's
    status; now the step it happened in records a warning (once), the console gets a toast, and (issue 30)
    the snapshot's warnings carry it, which headless prints on stderr at once."""
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0, 4.0, 4.0), step_s=2.0, warmup_s=0.0), record=record)
    hub = TelemetryHub([FakeSource("metrics", "server")])  # fed by hand: its polls never run
    ctl.link.hub = hub
    hub.record("metrics", Reading(1, gauges={"running": 1.0}))
    ctl.start_load()

    def one_step() -> None:
        window = fleet.window[0]
        _measure(ctl, fleet, clock, 2, ok=2, in_flight=4)
        clock.advance(0.2)
        fleet.ship(ok=4, in_flight=0, window=window, closed=True)
        tick(ctl)

    one_step()
    page = "http://127.0.0.1:9/metrics sent more than 8 MiB (telemetry dropped)"
    hub.fail("metrics", page)
    note = f"telemetry source metrics: {page}"
    one_step()
    hub.fail("metrics", page)
    one_step()  # still dropped: not said again
    events = [json.loads(t) for t in record.read_text().splitlines() if '"type":"event"' in t]
    warnings = [e for e in events if e.get("kind") == "warning"]
    assert [(w["note"], w["step"]) for w in warnings] == [(note, 2)], events
    assert [text for _, text in ctl.wheel.notices] == [note]
    assert ctl.status.warnings == [note]
    assert [s.index for s in ctl.steps.summaries] == [0, 1, 2]


def test_telemetry_gone_junk_mid_run_is_said_once_at_the_next_tick_not_a_single_slow_scrape() -> None:
    """Issue 30: a /metrics that answered and then went slow, trickling or junk was said nowhere but its
    panel. Two failed polls in a row after a good one are said once, at the next tick, without waiting for
    the step's end; one failed poll is not news, nor is a source that never answered (no /metrics)."""
    ctl, fleet, clock, _ = controller(plan=RampPlan((4.0,), step_s=60.0, warmup_s=0.0))
    hub = TelemetryHub([FakeSource("metrics", "server"), FakeSource("dcgm", "server")])
    ctl.link.hub = hub
    hub.record("metrics", Reading(1, gauges={"running": 1.0}))
    hub.fail("dcgm", "HTTP 404 from http://127.0.0.1:9/metrics")  # never answered: its panel says n/a
    hub.fail("dcgm", "HTTP 404 from http://127.0.0.1:9/metrics")
    ctl.start_load()
    junk = "not Prometheus text from http://127.0.0.1:9/metrics: Invalid line"
    hub.fail("metrics", junk)
    ctl.say_telemetry()
    assert ctl.status.warnings == []  # one bad scrape
    hub.fail("metrics", junk)
    _measure(ctl, fleet, clock, 1)
    ctl.say_telemetry()
    expected = f"telemetry source metrics lost mid-run: {junk}; server figures n/a while it fails"
    assert ctl.status.warnings == [expected]
    hub.record("metrics", Reading(2, gauges={"running": 1.0}))  # back, and lost again: said once a run
    hub.fail("metrics", junk)
    hub.fail("metrics", junk)
    ctl.say_telemetry()
    assert ctl.status.warnings == [expected]
    assert [text for _, text in ctl.wheel.notices] == [expected]
    assert ctl.steps.summaries == []  # said inside the 60 s step, not at its end
