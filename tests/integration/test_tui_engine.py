"""The console against the real engine and the embedded simulator: snapshots flow from the engine's
thread into the panels, a key changes the live level, quitting stops the run and closes the record."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.run.engine import Engine
from loadgen.sim import build_config as sim_config
from loadgen.sim import run_sim_in_thread
from tui.app import RampApp
from tui.dialogs import ConfirmQuit


@pytest.mark.slow
async def test_console_drives_the_real_engine(tmp_path: Path) -> None:
    sim = run_sim_in_thread(sim_config("fast"))
    try:
        args = build_parser().parse_args(["demo", "--level", "2", "--out", str(tmp_path / "run.jsonl")])
        app = RampApp(refresh_hz=8.0)
        engine = Engine(build_config(args, sim.url), on_snapshot=app.snapshot_callback)
        app.attach(engine)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(600):  # up to ~30 s on a loaded machine; ends as soon as requests completed
                snap = app.shown_snapshot
                rolling = snap.windows.get("rolling") if snap is not None else None
                if snap is not None and snap.state == "running" and rolling is not None and rolling.ok > 0:
                    break
                assert snap is None or snap.state != "failed", snap.message
                await pilot.pause(0.05)
            assert app.shown_snapshot is not None and app.shown_snapshot.state == "running"
            level = app.shown_snapshot.level
            await pilot.press("up")
            for _ in range(200):
                if app.shown_snapshot.level == level + 1:
                    break
                await pilot.pause(0.05)
            assert app.shown_snapshot.level == level + 1
            assert f"level {level + 1}" in str(app.screen.query_one("#control").render())
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("y")
            await app.workers.wait_for_complete()
        outcome = engine.wait(timeout=10)
        assert outcome is not None and outcome.state == "stopped"
        assert (tmp_path / "run.jsonl").stat().st_size > 0
    finally:
        sim.stop()
