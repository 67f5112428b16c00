"""Drive the console through a short ramp against the embedded simulator and save screenshots.

Starts the simulator in a process of its own (``loadgen.sim.spawn_sim_process``), builds a RunConfig the
way ``ramp demo`` does, runs the real engine behind ``RampApp`` under Textual's Pilot, and saves SVGs
(plus PNGs when ``rsvg-convert`` is installed) into ``screenshots/``:

    python scripts/screenshots.py [--preset h200-llama8b] [--out screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadgen.cli import build_config, build_parser  # noqa: E402
from loadgen.engine import Engine  # noqa: E402
from loadgen.sim import build_config as sim_config  # noqa: E402
from loadgen.sim import spawn_sim_process  # noqa: E402
from tui.app import RampApp  # noqa: E402


def to_png(svg: Path) -> Path | None:
    """rsvg-convert mis-spaces Textual's non-breaking spaces; plain spaces with xml:space keep columns."""
    converter = shutil.which("rsvg-convert")
    if converter is None:
        return None
    text = svg.read_text(encoding="utf-8").replace("&#160;", " ")
    text = re.sub(r"<svg ", '<svg xml:space="preserve" ', text, count=1)
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False, encoding="utf-8") as tmp:
        tmp.write(text)
    png = svg.with_suffix(".png")
    subprocess.run([converter, "-w", "1600", tmp.name, "-o", str(png)], check=True)
    Path(tmp.name).unlink()
    return png


async def drive(app: RampApp, out: Path, min_steps: int, timeout_s: float) -> list[Path]:
    saved: list[Path] = []

    def shot(name: str) -> None:
        svg = out / f"{name}.svg"
        app.save_screenshot(filename=svg.name, path=str(out))
        saved.append(svg)

    async with app.run_test(size=(160, 48)) as pilot:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            snap = app.shown_snapshot
            if snap is not None and snap.state not in ("starting", "running", "paused"):
                break
            # A step well into its measurement window shows full histograms, not the first few samples.
            step = snap.windows.get("step") if snap is not None else None
            if (
                snap is not None
                and len(snap.steps) >= min_steps
                and not snap.warming_up
                and step
                and step.ok >= 64
            ):
                break
            await pilot.pause(0.25)
        await pilot.pause(0.5)
        shot("console-160x48")
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        shot("console-80x24")
        for key, name in (("2", "throughput"), ("3", "server"), ("4", "steps")):
            await pilot.press(key)
            await pilot.pause(0.3)
            shot(f"console-80x24-{name}")
        await pilot.press("q")
        await pilot.pause(0.2)
        if app.screen.__class__.__name__ == "ConfirmQuit":
            await pilot.press("y")
        await pilot.pause(2.5)
    return saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="h200-llama8b")
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    parser.add_argument("--steps", default="4,16,64,128")
    parser.add_argument("--step-seconds", default="10")
    parser.add_argument("--timeout", type=float, default=90.0)
    opts = parser.parse_args()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
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
                    "2",
                    "--out",
                    f"{tmp}/run.jsonl",
                ]
            )
            config = build_config(args, handle.url)
            app = RampApp(refresh_hz=4.0)
            engine = Engine(config, on_snapshot=app.snapshot_callback)
            app.attach(engine)
            levels = len(opts.steps.split(","))
            saved = asyncio.run(drive(app, out, min_steps=levels - 1, timeout_s=opts.timeout))
            engine.stop()
            engine.wait(timeout=10)
    finally:
        handle.stop()
    for svg in saved:
        png = to_png(svg)
        print(svg, png or "(no rsvg-convert: SVG only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
