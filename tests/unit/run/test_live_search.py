"""The SLA search steered from the console (``loadgen.run.live_search``), on a fake fleet and clock: started by
a command from the running load, it bisects as ``--find-max`` does and then holds the knee's level with the
run still live, following it: a held step that misses says the knee moved and the knee is found again below
it; a level the operator sets is a probe that counts, after which the search drives no more until resumed;
a stop holds the load where it is, even while a probe closes."""

from __future__ import annotations

import json
from pathlib import Path

from run_fakes import FakeClock, FakeFleet, controller, tick

from loadgen.config import SLO
from loadgen.run.controller import Controller
from loadgen.run.protocol import ResumeSearch, SetLevel, StartSearch, StopSearch


def searching(record: Path) -> tuple[Controller, FakeFleet, FakeClock]:
    """A console's run at level 1 (no plan) against a server that meets e2e p95 <= 2 s up to 6 streams."""
    ctl, fleet, clock, _ = controller(
        level=1, slo=SLO(e2e_p95_s=2.0), record=record, auto_step_s=2.0, after_plan="idle"
    )
    ctl.start_load()
    return ctl, fleet, clock


def turn(ctl: Controller, fleet: FakeFleet, clock: FakeClock, knee: int = 6) -> None:
    """One second of load: the requests the server answers at the level now (within 2 s up to ``knee``
    streams), and the ended steps' last."""
    e2e = 1.0 if ctl.load.level <= knee else 3.0
    for _ in range(2):  # a delta every half second, as a worker ships them: values in every slice
        clock.advance(0.5)
        fleet.ship(ok=2, in_flight=ctl.load.level, e2e_s=e2e)
        tick(ctl)
    ended = [seg.seg_id for seg in ctl.steps.segments.values() if seg.end is not None]
    for window in ended:  # a closing step's last requests, and those a key's cut carried
        fleet.ship(ok=1, in_flight=0, window=window, closed=True, e2e_s=e2e)
    tick(ctl)


def events(record: Path, kind: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    return [x for x in lines if x.get("type") == "event" and x.get("kind") == kind]


def test_a_search_started_by_a_key_bisects_then_holds_the_knee(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock = searching(record)
    turn(ctl, fleet, clock)
    ctl.command(StartSearch(1.0, 16.0))
    for _ in range(40):
        turn(ctl, fleet, clock)
        if ctl.wheel.search is None:
            break
    probes = [s for s in ctl.steps.summaries if s.ended_by == "plan"]
    levels = [s.level for s in probes]  # a level probed again (undecided) repeats
    assert [x for i, x in enumerate(levels) if not i or levels[i - 1] != x] == [8, 4, 6, 7]  # as --find-max
    assert ctl.status.state == "running" and ctl.load.level == 6  # live, at the knee
    assert ctl.load.auto and ctl.load.plan is not None  # followed: held in steps of a probe's length
    view = ctl.wheel.searching.view()
    assert view is not None and view.state == "following" and (view.met, view.missed) == (6.0, 7.0)
    assert view.level == 6.0 and view.summary.startswith("max 6 streams")
    before = len(ctl.steps.summaries)
    for _ in range(8):  # the server holds: so does the knee, its steps judged
        turn(ctl, fleet, clock)
    held = ctl.steps.summaries[before:]
    assert len(held) >= 2 and all(s.level == 6 and s.verdict.met for s in held) and ctl.load.level == 6
    assert [e["action"] for e in events(record, "search")] == ["start", "done"]
    (answer,) = events(record, "find_max")
    assert answer["max_level"] == 6.0 and answer["bounds"] == [1.0, 16.0]


def test_the_operators_level_is_a_probe_and_the_search_waits_to_be_resumed(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock = searching(record)
    ctl.command(StartSearch(1.0, 16.0))
    while not ctl.wheel.search or not ctl.wheel.search.probes:  # the first probe, at 8: missed
        turn(ctl, fleet, clock)
    ctl.command(SetLevel(5))  # cuts the probe at 4 under way
    assert ctl.load.level == 5 and ctl.load.auto  # a probe's length, on the search's timer
    for _ in range(6):
        turn(ctl, fleet, clock)
    search = ctl.wheel.search
    assert search is not None and [p.level for p in search.probes] == [8.0, 5.0]
    assert search.probes[-1].met and ctl.wheel.searching.held
    assert ctl.load.level == 5 and not ctl.load.auto  # the search drives no more: the load stays
    view = ctl.wheel.searching.view()
    assert view is not None and view.state == "held" and view.probes[-1].by_operator
    ctl.command(ResumeSearch())  # from every probe so far: 5 met, 8 missed
    (probe,) = [e for e in events(record, "search") if e["action"] == "probe"]
    assert probe["level"] == 5.0 and probe["by"] == "operator" and probe["next"] in (5.0, 6.0)  # 5: again
    assert ctl.load.level == probe["next"] and ctl.load.auto
    actions = [e["action"] for e in events(record, "search")]
    assert actions == ["start", "paused", "probe", "resumed"]


def test_a_stop_holds_the_load_even_while_a_probe_closes(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock = searching(record)
    ctl.command(StartSearch(1.0, 16.0))
    for _ in range(4):
        clock.advance(1.0)
        fleet.ship(ok=2, in_flight=8, e2e_s=3.0)
        tick(ctl)
    assert ctl.steps.closing is not None  # the probe at 8 holds its load until its requests are done
    ctl.command(StopSearch())
    for _ in range(4):
        turn(ctl, fleet, clock)
    assert ctl.wheel.search is None and ctl.load.level == 8 and not ctl.load.auto
    (stopped,) = [e for e in events(record, "search") if e["action"] == "stopped"]
    assert stopped["why"] == "stopped by the operator" and stopped["probes"] == 0
    assert not events(record, "find_max")  # no answer: none is written


def test_a_followed_knee_that_moves_down_is_said_and_found_again(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock = searching(record)
    ctl.command(StartSearch(1.0, 16.0))
    for _ in range(40):
        turn(ctl, fleet, clock)
        if ctl.wheel.searching.following is not None:
            break
    assert ctl.wheel.searching.following == 6.0 and ctl.wheel.search is None
    turn(ctl, fleet, clock)  # a held step under way at 6
    for _ in range(40):  # the server slows: it meets the SLO up to 3 streams only
        turn(ctl, fleet, clock, knee=3)
        if ctl.wheel.searching.following == 3.0:
            break
    assert ctl.wheel.searching.following == 3.0 and ctl.load.level == 3 and ctl.load.auto
    actions = [e["action"] for e in events(record, "search")]
    assert actions == ["start", "done", "moved", "done"]
    moved = events(record, "search")[2]
    assert moved["level"] == 6.0 and moved["bounds"] == [1.0, 6.0] and moved["figure"] == "e2e p95"
    lo, hi = moved["interval"]
    assert abs(moved["value"] - 3.0) < 0.01 and lo > moved["limit"] == 2.0 and moved["past"] == ">"
    held = {s.index + 1: s for s in ctl.steps.summaries}[moved["held_step"]]
    assert held.level == 6 and held.verdict.on_intervals == "missed"  # a step of its own, at the knee
    assert events(record, "search")[3]["was"] == 6.0
    first, again = events(record, "find_max")
    assert (first["max_level"], again["max_level"]) == (6.0, 3.0) and again["bounds"] == [1.0, 6.0]
    assert again["probes"][0]["step"] == moved["held_step"]  # the held step is the new search's first probe
    levels = [p["level"] for p in again["probes"]]  # a level probed again (undecided) repeats
    assert [x for i, x in enumerate(levels) if not i or levels[i - 1] != x] == [6.0, 3.0, 4.0]
    view = ctl.wheel.searching.view()
    assert view is not None and view.state == "following" and view.level == 3.0


def test_f_stops_following_and_the_load_holds_with_no_set_length(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    ctl, fleet, clock = searching(record)
    ctl.command(StartSearch(1.0, 16.0))
    for _ in range(40):
        turn(ctl, fleet, clock)
        if ctl.wheel.searching.following is not None:
            break
    ctl.command(StopSearch())
    assert ctl.wheel.searching.following is None and not ctl.load.auto and ctl.load.plan is None
    for _ in range(5):  # the server slows, but nobody follows the knee now
        turn(ctl, fleet, clock, knee=3)
    assert ctl.load.level == 6 and ctl.wheel.search is None
    stopped = events(record, "search")[-1]
    assert stopped["action"] == "stopped" and stopped["following"] == 6.0
    view = ctl.wheel.searching.view()
    assert view is not None and view.state == "done"
