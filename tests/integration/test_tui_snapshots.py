"""Screen snapshots (pytest-textual-snapshot) of the console fed deterministic Snapshots: the main screen
at 80x24 (tabs) and 160x48 (grid), an open-loop client-bound run, and missing telemetry; and what the
verdicts stand on (issue 9): flagged steps at 120x36 and 160x48, the step and errors detail views, the
curve with an outlier, a finished plan waiting for a key.

Regenerate with ``pytest tests/integration/test_tui_snapshots.py --snapshot-update`` and look at the SVGs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_tui_baseline import baseline_steps, console_app, live_config, write_baseline
from textual.pilot import Pilot
from tui_fakes import FakeEngine, judged_steps, make_snapshot, step
from tui_fakes import make_app as console_on

from loadgen.snapshot import ClientHealth, ServerPoint, ServerTelemetry, SLOVerdict
from tui.app import RampApp


def make_app(**changes: Any) -> RampApp:
    return console_on(**changes)[0]


async def drawn(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, RampApp)
    app.redraw(force=True)
    await pilot.pause()


def test_main_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=drawn)


def test_main_160x48(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=drawn)


def test_open_loop_client_bound_80x24(snap_compare: Any) -> None:
    app = make_app(
        mode="open",
        rate_rps=24.0,
        achieved_rps=17.2,
        level=128,
        arrival="poisson",
        queued=37,
        warming_up=False,
        health=ClientHealth(
            loop_lag_ms_p99=48.0,
            loop_lag_ms_max=120.0,
            cpu_pct=(99.0,),
            client_bound=True,
            reason="worker CPU 99%: add --workers",
        ),
    )
    assert snap_compare(app, terminal_size=(80, 24), run_before=drawn)


def test_missing_telemetry_server_tab_80x24(snap_compare: Any) -> None:
    server = ServerTelemetry(
        sources={"vllm /metrics": "HTTP 404 at /metrics", "nvml": "pynvml not installed"}
    )
    app = make_app(server=server, state="paused", paused=True)

    async def server_tab(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press("3")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=server_tab)


@pytest.mark.parametrize("tab", ["2", "4", "5", "6"])
def test_tabs_80x24(snap_compare: Any, tab: str) -> None:
    async def open_tab(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press(tab)
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=open_tab)


@pytest.mark.parametrize("key", ["question_mark", "q", "l"])
def test_dialogs_80x24(snap_compare: Any, key: str) -> None:
    async def open_dialog(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press(key)
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=open_dialog)


# ---- issue 9: what the verdicts stand on ----------------------------------------------------------------

LATEST_ERRORS = {
    "http_status": "HTTP 400: This model's maximum context length is 8192 tokens. However, you requested "
    "9120 tokens (8800 in the messages, 320 in the completion). Please reduce the length of the messages.",
    "stream_cut": "stream cut after 112 tokens: connection reset by peer",
}


def judged_app(**changes: Any) -> RampApp:
    """Steps with a client-bound one, a cut one and a failing clause; the step closing; a lag spike."""
    values: dict[str, Any] = {
        "steps": judged_steps(),
        "best_step": 2,
        "phase": "closing",
        "closing_left": 12,
        "step_remaining_s": 0.0,
        "latest_errors": LATEST_ERRORS,
        "health": ClientHealth(loop_lag_ms_p99=5.32, loop_lag_ms_max=7.0, cpu_pct=(41.0,)),
    }
    values.update(changes)
    return make_app(**values)


def test_judged_steps_120x36(snap_compare: Any) -> None:
    assert snap_compare(judged_app(), terminal_size=(120, 36), run_before=drawn)


def test_judged_steps_160x48(snap_compare: Any) -> None:
    assert snap_compare(judged_app(), terminal_size=(160, 48), run_before=drawn)


@pytest.mark.parametrize("key", ["d", "e"])
def test_detail_views_80x24(snap_compare: Any, key: str) -> None:
    async def open_view(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press(key)
        await pilot.pause()

    assert snap_compare(judged_app(), terminal_size=(80, 24), run_before=open_view)


def test_curve_with_an_outlier_80x24(snap_compare: Any) -> None:
    steps = judged_steps()
    far = steps[-1].stats.hist["ttft_ms"]
    outlier = replace(far, pct=replace(far.pct, p95=60_000.0))
    last = replace(
        steps[-1], stats=replace(steps[-1].stats, hist={**steps[-1].stats.hist, "ttft_ms": outlier})
    )

    async def curve_tab(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press("5")
        await pilot.pause()

    app = judged_app(steps=(*steps[:-1], last))
    assert snap_compare(app, terminal_size=(80, 24), run_before=curve_tab)


async def drawn_with_its_toast(pilot: Pilot) -> None:
    """Drawn once the finished plan's toast is up: the app posts it from the snapshot it draws, and beside
    other work the first frame could come before it (the snapshot then lacked the toast)."""
    await drawn(pilot)
    for _ in range(200):
        if pilot.app.screen.query("Toast"):
            break
        await pilot.pause(0.05)
    assert pilot.app.screen.query("Toast"), "the finished plan's toast never showed"
    await pilot.pause()


def test_finished_plan_waits_for_a_key_80x24(snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = judged_app(state="finished", phase="idle", level=0, in_flight=0, closing_left=0)
    # the toast stays up until the screenshot: beside other work, its 5 s could run out between the moment
    # it was seen and the screenshot (the snapshot then lacked it)
    monkeypatch.setattr(type(app), "NOTIFICATION_TIMEOUT", 3600.0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=drawn_with_its_toast)


# ---- issue 11: a live baseline ------------------------------------------------------------------------------


def test_curve_with_a_baseline_120x36(snap_compare: Any, tmp_path: Path) -> None:
    """The baseline's levels as ◇ on the curve, its percentiles at the run's level (64 streams) as △ on the
    histograms, each step against it in the steps table."""
    planned = live_config(tmp_path)
    steps = [*baseline_steps(), replace(step(6, 64, 4700.0, 400.0, False), repeat=0)]
    path = write_baseline(tmp_path / "base.jsonl", planned, steps)
    app, _ = console_app(live_config(tmp_path, path))
    assert snap_compare(app, terminal_size=(120, 36), run_before=drawn)


# ---- issue 21: glyphs that fused and tore ---------------------------------------------------------------


def test_main_60x20_has_no_stray_palette_text(snap_compare: Any) -> None:
    """The footer's keys ran under the docked "^p palette" ("palettei"); under 80 columns it is left out."""
    assert snap_compare(make_app(), terminal_size=(60, 20), run_before=drawn)


def test_basic_glyphs_draw_an_empty_queue_as_empty_80x24(snap_compare: Any) -> None:
    """TERM=linux: a waiting queue at zero all along is a baseline (_), never a bar."""
    quiet = tuple(ServerPoint(float(t - 59), 61.0, 0.0, 0.0) for t in range(60))
    server = replace(make_snapshot().server, history=quiet)
    app = RampApp(refresh_hz=4.0, basic_glyphs=True)
    app.attach(FakeEngine(make_snapshot(server=server), on_snapshot=app.snapshot_callback))

    async def server_tab(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press("3")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=server_tab)


def test_client_bound_advice_and_paired_ttft_120x36(snap_compare: Any) -> None:
    """The advice is kept at 120 columns (the figures give way); 'step 22 server' keeps a gap before TTFT;
    a step that no request answered says '✕ no success' in the SLO cell."""
    reason = (
        "load worker waited for a CPU 35% of the time (loop lag over 5 ms in 3% of samples, max 21 ms): other "
        "processes hold this machine's cores; run ramp on another host"
    )
    steps = judged_steps()
    failed = replace(
        steps[-1],
        index=21,
        verdict=SLOVerdict(False, ("no successful request (12 errors)",)),
        server={"server_ttft_p50_ms": 402.0, "server_ttft_p95_ms": 655.0},
    )
    app = judged_app(
        steps=(*steps[:-1], failed),
        health=ClientHealth(loop_lag_ms_p99=48.0, cpu_pct=(41.0,), client_bound=True, reason=reason),
    )
    assert snap_compare(app, terminal_size=(120, 36), run_before=drawn)
