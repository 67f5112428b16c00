"""Drive the console through a short ramp against the embedded simulator and save screenshots.

Starts the simulator in a process of its own (``loadgen.sim.spawn_sim_process``), builds a RunConfig the
way ``ramp demo`` does, runs the real engine behind ``RampApp`` under Textual's Pilot, and saves each screen
the way the console's ``s`` key does (``tui.screenshot``): the SVG with its spaces fixed, a text capture
(``.txt``) and a PNG (``rsvg-convert``, ``apt-get install librsvg2-bin``) into ``screenshots/``: the main
screen at 160x48, 120x36, 80x24 and 60x20, every tab at 80x24, the step and errors detail views, and ``ramp
attach``'s read-only console at 80x24 (fed from the run's ``/snapshot``, as ``--metrics-port`` shares it), and
``ramp replay``'s screens of ``tests/fixtures/replay/run.jsonl`` (``tui.replay.REPLAY_SCREENS``: drawn from
the record alone, so ``tests/integration/test_screenshots_current.py`` holds their committed text to the code). A mark is
placed (``k``) during the run, so that the timeline shows one; the last step is held (auto-ramp off) once
it has measured a while, so that every screen shows it measuring.

    python scripts/screenshots.py [--preset h200-llama8b] [--out screenshots] [--only attach-80x24,...]
    python scripts/screenshots.py --replay-only   # the replay screens alone: seconds, no run
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual.pilot import Pilot  # noqa: E402

from loadgen.cli.commands import build_parser  # noqa: E402
from loadgen.cli.resolve import build_config  # noqa: E402
from loadgen.observe.exporter import with_exporter  # noqa: E402
from loadgen.observe.remote import RemoteRun, snapshot_url  # noqa: E402
from loadgen.run.engine import Engine  # noqa: E402
from loadgen.run.protocol import SetAuto  # noqa: E402
from loadgen.sim import build_config as sim_config  # noqa: E402
from loadgen.sim import spawn_sim_process  # noqa: E402
from loadgen.snapshot import Snapshot  # noqa: E402
from tui.app import RampApp  # noqa: E402
from tui.attach import AttachApp  # noqa: E402
from tui.replay import replay_screens  # noqa: E402
from tui.screenshot import Saved, save_all  # noqa: E402

# The last step is held (auto-ramp off, as the operator would) once it has measured MEASURED_S (histograms
# filled, the server's history a few samples long) with at least HOLD_S of its window left: every screen is
# taken while it measures, however long the screens take on a busy machine.
HOLD_S = 3.0
ATTACH_S = 90.0  # for the attached console's first snapshots, after the operator's screens
REPLAY_RECORD = ROOT / "tests" / "fixtures" / "replay" / "run.jsonl"
MEASURED_S = 10.0
WARMUP_S = 2.0


class NotCaptured(Exception):
    """The run never reached a step measuring with time left: the screens would show an idle console."""


async def wait_until(
    pilot: Pilot[None], done: Callable[[Snapshot], bool], deadline: float, what: str
) -> None:
    """Poll the app's shown snapshot (a script against a real run, so real time) until ``done``; the run
    ending first, or the deadline, raises ``NotCaptured`` naming ``what``."""
    app = pilot.app
    assert isinstance(app, RampApp)
    while time.monotonic() < deadline:
        snap = app.shown_snapshot
        if snap is not None and done(snap):
            return
        if snap is not None and snap.state in ("stopped", "failed", "finished"):
            raise NotCaptured(f"the run was {snap.state} before {what}")
        await pilot.pause(0.25)
    raise NotCaptured(f"no {what} within the timeout")


def well_measured(min_steps: int, warmup_s: float) -> Callable[[Snapshot], bool]:
    """Enough finished steps, and the current one MEASURED_S into its window with HOLD_S left."""

    def check(snap: Snapshot) -> bool:
        step = snap.windows.get("step")
        left = snap.step_remaining_s
        measuring = snap.phase == "measure" and not snap.warming_up and step is not None and step.ok > 0
        into = snap.step_elapsed_s - warmup_s
        return (
            len(snap.steps) >= min_steps
            and measuring
            and into >= MEASURED_S
            and (left is None or left >= HOLD_S)
        )

    return check


async def drive(
    app: RampApp,
    engine: Engine,
    out: Path,
    min_steps: int,
    warmup_s: float,
    timeout_s: float,
    share_url: str,
) -> list[tuple[str, Path]]:
    taken: list[tuple[str, Path]] = []  # the SVG as exported, and where its files go (after the run)

    started = time.monotonic()

    def shot(name: str) -> None:
        taken.append((app.export_screenshot(), out / f"{name}.svg"))
        print(f"screenshots: {name} at {time.monotonic() - started:.0f} s", file=sys.stderr)

    async with app.run_test(size=(160, 48)) as pilot:
        deadline = time.monotonic() + timeout_s
        await wait_until(pilot, lambda snap: len(snap.steps) >= 1, deadline, "a first finished step")
        print(
            f"screenshots: a first step finished at {time.monotonic() - deadline + timeout_s:.0f} s",
            file=sys.stderr,
        )
        await pilot.press("k", *"raised the level by hand", "enter")
        await wait_until(
            pilot, well_measured(min_steps, warmup_s), deadline, "a last step measuring with time left"
        )
        print(f"screenshots: measuring at {time.monotonic() - started:.0f} s", file=sys.stderr)
        engine.send(SetAuto(False))  # the step holds: no timer ends it while the screens are taken
        await pilot.pause(0.5)
        for size in ((160, 48), (120, 36)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.5)
            shot(f"console-{size[0]}x{size[1]}")
        await pilot.press("d")
        await pilot.pause(0.3)
        shot("console-120x36-step-detail")
        await pilot.press("escape")
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        shot("console-80x24")
        for key, name in (
            ("2", "throughput"),
            ("3", "server"),
            ("4", "steps"),
            ("5", "curve"),
            ("6", "errors"),
        ):
            await pilot.press(key)
            await pilot.pause(0.3)
            shot(f"console-80x24-{name}")
        for key, name in (("d", "step-detail"), ("e", "errors-detail")):
            await pilot.press(key)
            await pilot.pause(0.3)
            shot(f"console-80x24-{name}")
            await pilot.press("escape")
        attached = AttachApp(RemoteRun(snapshot_url(share_url)))  # the room's view of the same run
        async with attached.run_test(size=(80, 24)) as room:
            # the operator's snapshot as the room attached: a moving target is never reached on a busy machine
            target = app.shown_snapshot.seq if app.shown_snapshot is not None else 0
            attach_by = max(deadline, time.monotonic() + ATTACH_S)  # its own time, whatever the run took
            await wait_until(room, lambda snap: snap.seq >= target, attach_by, "attach")
            await room.pause(0.5)
            attached.clear_notifications()  # its greeting toast would cover the histograms
            await room.pause(0.3)
            taken.append((attached.export_screenshot(), out / "attach-80x24.svg"))
            await room.press("q")
        await pilot.resize_terminal(60, 20)  # the smallest the console is tried at (an SSH pane, a split)
        await pilot.press("1")
        await pilot.pause(0.5)
        shot("console-60x20")
        await pilot.press("q")
        await pilot.pause(0.2)
        if app.screen.__class__.__name__ == "ConfirmQuit":
            await pilot.press("y")
        await pilot.pause(2.5)
    return taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="h200-llama8b")
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--steps", default="4,16,32,64")
    parser.add_argument("--step-seconds", default="20")
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--only", default="", help="save only these screens (names, comma-separated)")
    parser.add_argument("--replay-only", action="store_true", help="only the replay screens (no run)")
    opts = parser.parse_args()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    only = {name for name in opts.only.split(",") if name}
    replayed = [(svg, out / f"{name}.svg") for name, svg in asyncio.run(replay_screens(str(REPLAY_RECORD)))]
    if opts.replay_only:
        save(replayed, only)
        return 0
    handle = spawn_sim_process(sim_config(opts.preset))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            args = build_parser().parse_args(
                [
                    "demo",
                    "--steps",
                    opts.steps,
                    "--step-seconds",
                    opts.step_seconds,
                    "--warmup",
                    str(WARMUP_S),
                    "--out",
                    f"{tmp}/run.jsonl",
                ]
            )
            config, metrics = with_exporter(build_config(args, handle.url), "127.0.0.1", 0, lambda text: None)
            assert metrics is not None
            app = RampApp(refresh_hz=4.0)
            engine = Engine(config, on_snapshot=app.snapshot_callback)
            app.attach(engine)
            levels = len(opts.steps.split(","))
            try:
                taken = asyncio.run(drive(app, engine, out, levels - 1, WARMUP_S, opts.timeout, metrics.url))
            except NotCaptured as exc:
                print(f"screenshots not taken: {exc}; try a longer --step-seconds", file=sys.stderr)
                return 1
            finally:
                engine.stop()
                engine.wait(timeout=10)
                metrics.close()
    finally:
        handle.stop()
    save(taken + replayed, only)  # written after the run: rendering PNGs must not take the run's CPU
    return 0


def save(taken: list[tuple[str, Path]], only: set[str]) -> None:
    for svg, path in taken:
        if only and path.stem not in only:
            continue
        saved: Saved = save_all(svg, path)
        print(saved.svg, saved.text.name, saved.png.name if saved.png else saved.note)


if __name__ == "__main__":
    raise SystemExit(main())
