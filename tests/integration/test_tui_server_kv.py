"""The server panel's KV headroom and history: the cache in sequences of this profile beside its usage, the
level warned against it, running / waiting / preemptions as sparklines over the last minutes, and the rows
that give way on a short panel. Unit checks on ``render_server`` plus screen snapshots of the server tab
(80x24) and the main screen (160x48) with the level above the headroom.

Regenerate with ``pytest tests/integration/test_tui_server_kv.py --snapshot-update`` and look at the SVGs."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from textual.pilot import Pilot
from tui_fakes import make_app as console_on
from tui_fakes import make_snapshot, server_telemetry

from loadgen.snapshot import KVHeadroom, ServerPoint, ServerTelemetry
from tui.app import RampApp
from tui.server import render_server

# 60,000 blocks of 16 tokens; 2,496 tokens of mean context take 156 blocks: 384 sequences; p95 4,096: 234.
ROOM = KVHeadroom(960_000, "num_gpu_blocks x block_size", 16, 60_000, 2496.0, 4096, 384, 234)


def history(points: int = 60) -> tuple[ServerPoint, ...]:
    """Two minutes, one sample each 2 s: running climbs to the cap, then requests wait and get preempted."""
    out = []
    for i in range(points):
        t = -2.0 * (points - 1 - i)
        running = min(384.0, 8.0 * i)
        waiting = max(0.0, 8.0 * i - 384.0)
        out.append(ServerPoint(t, running, waiting, float(max(0, i - 50))))
    return tuple(out)


def loaded() -> ServerTelemetry:
    return replace(
        server_telemetry(),
        kv_cache_usage=0.97,
        running=384.0,
        waiting=88.0,
        preemptions_per_s=4.5,
        preemptions_total=45.0,
        kv_headroom=ROOM,
        history=history(),
    )


def test_the_headroom_row_names_the_sequences_at_the_mean_and_p95_context() -> None:
    assert ROOM.seqs_at_mean == 60_000 // math.ceil(2496 / 16) and ROOM.seqs_at_p95 == 60_000 // (4096 // 16)
    text = render_server(loaded(), 80, client=make_snapshot(level=256)).plain
    assert "KV cache" in text and "97.0% of 960k tok" in text
    assert "KV headroom   ~384 seqs at 2.5k tok  p95 ~234 at 4.1k" in text
    assert "level 256 >" not in text
    over = render_server(loaded(), 80, client=make_snapshot(level=512)).plain
    assert "KV headroom   level 512 > ~384 seqs at 2.5k tok" in over


def test_history_rows_show_sparklines_and_their_span() -> None:
    lines = render_server(loaded(), 80, client=make_snapshot(level=512)).plain.splitlines()
    running = next(line for line in lines if line.startswith("running"))
    waiting = next(line for line in lines if line.startswith("waiting"))
    preempt = next(line for line in lines if line.startswith("preemptions"))
    assert running.rstrip().endswith("last 1:58") and "    384 " in running
    # running fills up then stays at its cap; waiting is empty for the first half, then grows to its top
    spark = running.split("384 ", 1)[1].split("  last")[0]
    assert spark[0] == "▁" and spark[-1] == "█" and len(spark) > 40
    # one scale for both: 88 waiting beside 384 running draws a quarter high
    wait = waiting.split("88 ", 1)[1]
    assert wait.startswith("▁") and wait.rstrip().endswith("▃")
    assert "4.50/s" in preempt and "(total 45)" in preempt and "█" in preempt


def test_a_short_panel_folds_the_history_then_drops_the_least_needed_rows() -> None:
    full = render_server(loaded(), 60, client=make_snapshot(level=512)).plain.splitlines()
    assert any(line.startswith("running") for line in full) and any(
        line.startswith("sources") for line in full
    )
    # 7 rows stay with the history (GPU, KV, headroom, running, waiting, preemptions, server TTFT): at 6
    # the history folds into one requests row, and the sources, token rates and prefix cache go.
    short = render_server(loaded(), 60, client=make_snapshot(level=512), height=6).plain.splitlines()
    assert [line[:14].strip() for line in short] == [
        "GPU0 H200",
        "KV cache",
        "KV headroom",
        "requests",
        "preemptions",
        "server TTFT",
    ]
    assert short[3].startswith("requests      running 384  waiting 88")


def test_a_panel_a_little_short_keeps_the_history_and_drops_rates_and_sources() -> None:
    lines = render_server(loaded(), 60, client=make_snapshot(level=512), height=8).plain.splitlines()
    labels = [line[:14].strip() for line in lines]
    assert labels == [
        "GPU0 H200",
        "KV cache",
        "KV headroom",
        "running",
        "waiting",
        "preemptions",
        "prefix cache",
        "server TTFT",
    ]


def make_app(level: int) -> RampApp:
    return console_on(server=loaded(), level=level)[0]


async def drawn(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, RampApp)
    app.redraw(force=True)
    await pilot.pause()


def test_server_tab_with_headroom_and_history_80x24(snap_compare: Any) -> None:
    async def server_tab(pilot: Pilot) -> None:
        await drawn(pilot)
        await pilot.press("3")
        await pilot.pause()

    assert snap_compare(make_app(512), terminal_size=(80, 24), run_before=server_tab)


def test_main_screen_with_headroom_160x48(snap_compare: Any) -> None:
    assert snap_compare(make_app(512), terminal_size=(160, 48), run_before=drawn)
