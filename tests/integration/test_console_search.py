"""The knee, live (issue 32): ``f`` in the console starts the SLA search against a server with a known knee,
the header says what it does and why, the curve panel draws its probes, fit and bracket, ``f`` stops it, and
a level the operator sets during it is a probe like any other (the search stops driving).

The server is ``benchmarks/bench_knee.py``'s: the simulator with every engine step exactly 10 ms and at most
4 sequences running, requests of 10 to 30 output tokens. Up to 4 streams a request starts at once (TTFT p95
~20 ms); at 8 each waits for a slot (~200 ms): with TTFT p95 <= 100 ms the knee is 4. A search over 1:16
probes 8 first (missed), then 4 (met).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_fakes import text_of

from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost
from loadgen.snapshot import Snapshot
from loadgen.types import Target
from tui.app import RampApp
from tui.knee import KNEE_MARKERS, probe_kind
from tui.panel import SnapshotPanel

EXACT = StepCost(10.0, 0.0, 0.0, ((0, 10.0), (1 << 20, 10.0)), spec_draft_ms=0.0)
PROFILE = """
name = "slots"
[[bucket]]
input = 16
output = { min = 10, max = 30 }
[sampling]
ignore_eos = true
[slo]
ttft_p95_ms = 100
"""
# 'probing 8: TTFT p95 212 ± 30 ms, missed, ≈2 s' (one side of the interval only, while too few values lie
# beyond p95: 'TTFT p95 271 ms (95 %: ≥239), undecided')
LIVE = re.compile(
    r"probing \d+: TTFT p95 [\d.]+ (± [\d.]+ ms|ms \(95 %: [≥≤][\d.]+\)), (undecided|met so far|missed), ≈\d+ s"
)

pytestmark = pytest.mark.sim(
    "tiny-cpu",
    seed=1,
    max_num_seqs=4,
    cost=EXACT,
    kv_capacity_tokens=1 << 22,
    max_model_len=4096,
    process=True,
)


def console(sim: ProcessSimHandle, out: Path) -> tuple[RampApp, Engine]:
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<slots>"),
        level=1,
        out=str(out),
        telemetry=False,
        seed=1,
        after_plan="idle",
        auto_step_s=4.0,  # a probe's longest
        warmup_s=0.3,
    )
    app = RampApp(refresh_hz=8.0, config=config)
    engine = Engine(config, on_snapshot=app.snapshot_callback)
    app.attach(engine)
    return app, engine


def header(app: RampApp) -> str:
    return " ".join(text_of(app.screen.query_one("#status", SnapshotPanel)).split())


async def until(
    pilot: Pilot[None],
    app: RampApp,
    done: Callable[[Snapshot], bool],
    seen: list[str] | None = None,
    seconds: float = 60.0,
) -> Snapshot:
    """Pause until ``done`` holds of the app's newest snapshot; ``seen``: the headers on the way."""
    for _ in range(int(seconds / 0.1)):
        snap = app.latest_snapshot
        if snap is not None and done(snap):
            return snap
        assert snap is None or snap.state != "failed", snap.message
        if seen is not None:
            seen.append(header(app))
        await pilot.pause(0.1)
    raise AssertionError(f"not within {seconds} s: {app.latest_snapshot and app.latest_snapshot.search}")


async def start_search(pilot: Pilot[None], app: RampApp, bounds: str) -> None:
    await until(pilot, app, lambda s: s.state == "running")
    await pilot.press("f")  # the prompt shows the default range; the first key typed replaces it
    await pilot.press(*bounds, "enter")


def lines(out: Path, kind: str) -> list[dict[str, Any]]:
    """The record's events of ``kind``, or its step lines (``kind`` "step")."""
    read = [json.loads(line) for line in out.read_text().splitlines()]
    if kind == "step":
        return [x for x in read if x.get("type") == "step"]
    return [x for x in read if x.get("type") == "event" and x.get("kind") == kind]


async def quit_console(pilot: Pilot[None], app: RampApp, engine: Engine) -> None:
    await pilot.press("q", "y")
    await app.workers.wait_for_complete()
    assert engine.wait(timeout=15) is not None


@pytest.mark.slow
async def test_f_starts_the_search_the_header_and_curve_follow_it_and_f_stops_it(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    app, engine = console(sim, out)
    seen: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await start_search(pilot, app, "1:16")
        snap = await until(pilot, app, lambda s: s.search is not None and len(s.search.probes) >= 2, seen)
        view = snap.search
        assert view is not None and view.state == "probing" and (view.lo, view.hi) == (1.0, 16.0)
        first, second = view.probes[:2]
        assert (first.level, first.met) == (8.0, False)  # the middle of 1:16: every request waits for a slot
        assert (second.level, second.met) == (4.0, True)  # 4 slots: none waits
        assert (view.met, view.missed) == (4.0, 8.0)  # the bracket so far
        app.redraw(force=True)
        await pilot.pause()
        curve = app.screen.query_one("#curve-panel", SnapshotPanel)
        drawn = text_of(curve)
        marks = [KNEE_MARKERS[probe_kind(p)] for p in (first, second)]  # ✕, then ● (or ? while undecided)
        assert "SLO use vs level" in drawn and all(m in drawn for m in marks) and "│" in drawn, drawn
        assert curve.border_title == "Knee search" and "│ 4–8" in str(curve.border_subtitle)
        assert LIVE.search(" | ".join(seen)), seen
        await pilot.press("f")  # stops it: the load holds where it is
        snap = await until(pilot, app, lambda s: s.search is not None and s.search.state == "stopped")
        assert "search stopped (stopped by the operator)" in header(app)
        held = snap.level
        await pilot.pause(1.0)
        assert app.latest_snapshot is not None and app.latest_snapshot.level == held
        await quit_console(pilot, app, engine)
    start, stopped = lines(out, "search")
    assert (start["action"], stopped["action"]) == ("start", "stopped")
    assert start["bounds"] == [1.0, 16.0] and start["level"] == 8.0 and start["by"] == "key"
    assert stopped["probes"] >= 2 and stopped["why"] == "stopped by the operator"
    probes = [s for s in lines(out, "step") if s["ended_by"] in ("decided", "plan")]  # held to a verdict
    assert [(s["level"], s["slo_met"]) for s in probes[:2]] == [(8, False), (4, True)]


@pytest.mark.slow
async def test_a_level_set_during_the_search_is_a_probe_and_the_search_stops_driving(
    sim: ProcessSimHandle, tmp_path: Path
) -> None:
    out = tmp_path / "run.jsonl"
    app, engine = console(sim, out)
    async with app.run_test(size=(160, 48)) as pilot:
        await start_search(pilot, app, "1:16")
        await until(pilot, app, lambda s: s.search is not None and len(s.search.probes) >= 1)
        await pilot.press("l", "6", "enter")  # the operator takes over at 6
        await until(pilot, app, lambda s: s.search is not None and s.search.state == "held")
        assert "search paused: operator took over" in header(app)
        snap = await until(
            pilot, app, lambda s: s.search is not None and any(p.by_operator for p in s.search.probes)
        )
        view = snap.search
        assert view is not None and view.state == "held"
        mine = [p for p in view.probes if p.by_operator]
        assert [p.level for p in mine] == [6.0] and not mine[0].met  # 2 streams wait for a slot
        await pilot.pause(1.5)  # the search drives no more: the load holds at the operator's level
        later = app.latest_snapshot
        assert later is not None and later.level == 6 and later.search is not None
        assert later.search.state == "held" and len(later.search.probes) == len(view.probes)
        assert later.step_remaining_s is None  # a step of no set length, as a key's
        await quit_console(pilot, app, engine)
    by_action = {e["action"]: e for e in lines(out, "search")}
    assert list(by_action) == ["start", "paused", "probe"]
    assert by_action["paused"]["why"] == "operator took over"
    probe = by_action["probe"]
    assert probe["level"] == 6.0 and probe["verdict"] in ("missed", "undecided")
    step = {s["step"]: s for s in lines(out, "step")}[probe["probe_step"]]
    assert step["level"] == 6 and step["ended_by"] in ("decided", "plan")  # held to a verdict, as a probe
