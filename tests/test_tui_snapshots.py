"""Screen snapshots (pytest-textual-snapshot) of the console fed deterministic Snapshots: the main screen
at 80x24 (tabs) and 160x48 (grid), an open-loop client-bound run, and missing telemetry.

Regenerate with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the SVGs."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from tui_fakes import FakeEngine, make_snapshot

from loadgen.snapshot import ClientHealth, ServerTelemetry
from tui.app import RampApp


def make_app(**changes: Any) -> RampApp:
    app = RampApp(refresh_hz=4.0)
    app.attach(FakeEngine(make_snapshot(**changes), on_snapshot=app.snapshot_callback))
    return app


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
