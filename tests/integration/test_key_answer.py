"""A steering key's effect reaches the screen at once (issue 21 item 10), not a refresh tick later: the
engine publishes a snapshot as soon as it applies a command, and the console draws a snapshot that changes
what the operator steers as it arrives. Both are checked with the refresh slowed to seconds, so that an
answer waiting for the next tick cannot pass: the engine's against the embedded simulator, the console's
with snapshots pushed from another thread as the engine's are."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
from snapshot_watch import Watch
from tui_fakes import FakeEngine, make_snapshot

from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.run.protocol import Pause, SetLevel
from loadgen.snapshot import Snapshot
from loadgen.types import Target
from tui.app import RampApp
from tui.panel import SnapshotPanel

pytestmark = pytest.mark.sim("fast", seed=3)

PROFILE = """
name = "answer"
description = "short prompts, 32 output tokens"
[[bucket]]
input = 16
output = 32
"""
SLOW_HZ = 0.5  # a tick every 2 s (the slowest the engine allows)


def test_the_engine_publishes_a_command_at_once_not_at_the_next_tick(sim: Any) -> None:
    config = RunConfig(
        target=Target(url=sim.url),
        profile=parse_profile(PROFILE, source="<answer>"),
        level=1,
        snapshot_hz=SLOW_HZ,
        telemetry=False,
        warmup_s=0.0,
    )
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        running = watch.until(lambda s: s.state == "running", timeout=30, what="running")
        watch.until(lambda s: s.seq > running.seq, timeout=10, what="a tick")  # just published: 2 s to go
        for command, answered in ((SetLevel(3), lambda s: s.level == 3), (Pause(), lambda s: s.paused)):
            sent = time.monotonic()
            engine.send(command)
            watch.seen(answered, timeout=10, what=f"{command} applied")
            waited = time.monotonic() - sent
            assert waited < 1 / SLOW_HZ / 2, f"{command}: {waited:.2f} s, a tick's wait (2 s)"
    finally:
        engine.stop()
        assert engine.wait(30) is not None


def control_text(app: RampApp) -> str:
    return str(app.screen.query_one("#control").render())


def push_from_a_thread(app: RampApp, snapshot: Snapshot) -> None:
    thread = threading.Thread(target=app.snapshot_callback, args=(snapshot,))
    thread.start()
    thread.join()


async def test_the_console_draws_a_steered_change_as_it_arrives() -> None:
    first = make_snapshot(level=17)
    app = RampApp(refresh_hz=0.2)  # the redraw timer fires every 5 s: no test waits for it
    app.attach(FakeEngine(first, on_snapshot=app.snapshot_callback))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "level 17" in control_text(app)
        push_from_a_thread(app, dataclasses.replace(first, seq=2, level=32))
        await pilot.pause()
        assert "level 32" in control_text(app)
        # Figures alone (the periodic snapshots) still wait for the timer: the redraw rate stays fixed.
        push_from_a_thread(app, dataclasses.replace(first, seq=3, level=32, in_flight=5))
        await pilot.pause()
        assert "in flight 61" in control_text(app)
        push_from_a_thread(app, dataclasses.replace(first, seq=4, level=32, paused=True, state="paused"))
        await pilot.pause()
        assert "PAUSED" in str(app.screen.query_one("#status").render())


async def test_a_steered_change_is_drawn_in_the_header_at_once_and_everywhere_at_the_tick() -> None:
    """The header and the control lines take a steered snapshot as it arrives; the charts and tables (a few
    ms each to draw) take it at the next tick, so a key's effect never waits behind a whole repaint."""
    first = make_snapshot(level=17)
    app = RampApp(refresh_hz=0.2)
    app.attach(FakeEngine(first, on_snapshot=app.snapshot_callback))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        console = app.screen
        heavy = [p for p in console.query(SnapshotPanel) if not p.STEERED and p.snapshot is not None]
        assert {type(p).__name__ for p in heavy} >= {"HistogramPanel", "ThroughputPanel", "StepsPanel"}
        push_from_a_thread(app, dataclasses.replace(first, seq=2, level=32, in_flight=31))
        await pilot.pause()
        assert "level 32" in control_text(app) and "in flight 31" in control_text(app)
        assert all(p.snapshot is not None and p.snapshot.seq == 1 for p in heavy)
        app.redraw()  # the tick
        await pilot.pause()
        assert all(p.snapshot is not None and p.snapshot.seq == 2 for p in heavy)
        assert app.shown_snapshot is not None and app.shown_snapshot.seq == 2
