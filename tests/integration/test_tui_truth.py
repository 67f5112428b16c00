"""Issue 9 in the console: what a verdict stands on (client-bound, the failing SLO clause, cut steps), a
step detail view, the step's phase and the engine's notices, marks on the timeline, the curve's markers and
scale, the steps table at 120x36, the full text of errors, and server-vs-client TTFT over one request set.

Every test drives the real app (``run_test`` + Pilot) over snapshots pushed by hand through the fakes."""

from __future__ import annotations

import io
import re
from dataclasses import replace

import pytest
from rich.console import Console, RenderableType
from textual.pilot import Pilot
from tui_fakes import STEPS, FakeEngine, judged_steps, make_app, make_snapshot, server_telemetry, step

from loadgen.format import fmt_ms, fmt_num_trimmed
from loadgen.run.health import CLIENT_BOUND_LAG_MS
from loadgen.snapshot import ClientHealth, SLOVerdict, Snapshot, StepSummary
from tui.app import RampApp
from tui.console import ConsoleScreen
from tui.control import health_line
from tui.curve import MARKERS, render_curve
from tui.detail import ErrorsDetail, StepDetail
from tui.dialogs import HelpScreen
from tui.panel import SnapshotPanel
from tui.step_report import step_report

SIZE = (120, 36)
LONG_ERROR = (
    "HTTP 400: This model's maximum context length is 8192 tokens. However, you requested 9120 tokens "
    "(8800 in the messages, 320 in the completion). Please reduce the length of the messages or completion."
)


def plain(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def panel_text(app: RampApp, selector: str) -> str:
    panel = app.screen_stack[0].query_one(selector, SnapshotPanel)
    return plain(panel.render(), panel.content_region.width)


def flat(text: str) -> str:
    return " ".join(text.split())


def step_rows(table: str) -> dict[str, str]:
    """The steps table's rows by step number (the best one's star stripped)."""
    rows = {}
    for line in table.splitlines():
        match = re.match(r"\s*★?(\d+)\s", line)
        if match:
            rows[match.group(1)] = line
    return rows


async def show(app: RampApp, pilot: Pilot[None], snapshot: Snapshot | None = None) -> None:
    engine = app.engine
    assert isinstance(engine, FakeEngine)
    if snapshot is not None:
        engine.snapshot = snapshot
        engine.publish()
    app.redraw(force=True)
    await pilot.pause()


# ---- 1. what the verdict stands on -----------------------------------------------------------------------


async def test_steps_rows_show_client_bound_cut_share_and_the_failing_clause() -> None:
    app, _ = make_app(steps=judged_steps(), best_step=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await show(app, pilot)
        rows = step_rows(panel_text(app, "#steps-panel"))
        assert "bound" in rows["2"] and "bound" not in rows["1"]
        assert "cut 23%" in rows["4"] and "cut" not in rows["3"]
        assert "miss ITL p99" in rows["5"] or "✕ ITL p99" in rows["5"]  # ✕: TTFT p50 and err stay (issue 30)
        assert "★3" in rows["3"]


async def test_the_best_star_never_lands_on_a_cut_step() -> None:
    app, _ = make_app(steps=judged_steps(), best_step=3)  # an engine that still points at the cut step
    async with app.run_test(size=(160, 48)) as pilot:
        await show(app, pilot)
        assert "★" not in panel_text(app, "#steps-panel")
        subtitle = str(app.screen.query_one("#steps-panel", SnapshotPanel).border_subtitle)
        assert "step 4" not in subtitle


async def test_the_header_says_client_bound_live_and_for_a_flagged_step() -> None:
    bound = ClientHealth(
        loop_lag_ms_p99=48.0, cpu_pct=(99.0,), client_bound=True, reason="load worker at 99% CPU"
    )
    app, engine = make_app(health=bound)
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        assert "CLIENT-BOUND" in panel_text(app, "#status")
        healthy_now = ClientHealth(loop_lag_ms_p99=0.8, loop_lag_ms_max=2.0, cpu_pct=(41.0,))
        await show(app, pilot, replace(engine.snapshot, seq=50, health=healthy_now, steps=judged_steps()))
        status = panel_text(app, "#status")
        assert "step 2 client-bound" in status
        assert "step 2 client-bound" in panel_text(app, "#control")


def test_the_health_line_uses_the_engines_threshold_and_never_calls_a_spike_healthy() -> None:
    spike = make_snapshot(health=ClientHealth(loop_lag_ms_p99=5.32, loop_lag_ms_max=7.0, cpu_pct=(41.0,)))
    line = health_line(spike, 200, {}).plain
    assert "healthy" not in line
    assert f"> {fmt_num_trimmed(CLIENT_BOUND_LAG_MS)} ms" in line and "5.32 ms" in line
    calm = health_line(make_snapshot(), 200, {}).plain
    assert "healthy" in calm and f"{fmt_num_trimmed(CLIENT_BOUND_LAG_MS)} ms" in calm


# ---- 2. the step detail view -----------------------------------------------------------------------------


async def test_step_detail_view_shows_every_figure_of_a_step() -> None:
    steps = judged_steps()
    app, _ = make_app(steps=steps, best_step=2, latest_errors={"http_status": LONG_ERROR})
    async with app.run_test(size=(100, 40)) as pilot:
        await show(app, pilot)
        await pilot.press("d")
        assert isinstance(app.screen, StepDetail)
        latest = flat(app.screen.plain())
        assert "step 5" in latest and "ITL p99 128 ms > 100 ms" in latest
        assert "HTTP status" in latest and flat(LONG_ERROR) in latest  # errors by kind, with the text
        await pilot.press("left", "left")
        third = flat(app.screen.plain())
        stats = steps[2].stats
        for figure in (
            "step 3",
            "1,024,000",  # input tokens
            "512,000",  # output tokens
            fmt_ms(stats.pct("ttft_ms").p999),
            fmt_ms(stats.pct("e2e_ms").p99),
            "655 ms",  # the server's TTFT p95 over the step
            "2.4 s",  # closing time
            "bumped max_num_seqs",  # its mark
            "TTFT p95 ≤ 500 ms",  # an SLO clause
        ):
            assert figure in third, figure
        await pilot.press("left")
        assert "worker event loop lag over 5 ms in 3% of samples" in flat(app.screen.plain())
        await pilot.press("right", "right")
        assert "23%" in flat(app.screen.plain()) and "carried" in app.screen.plain()
        await pilot.press("escape")
        assert isinstance(app.screen, ConsoleScreen)


async def test_step_detail_is_a_listed_key() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert ("d", "Step details") in app.screen.keys
        assert ("e", "Error details") in app.screen.keys


async def test_step_detail_without_steps_says_so() -> None:
    app, _ = make_app(steps=(), best_step=None)
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        await pilot.press("d")
        assert isinstance(app.screen, StepDetail)
        assert "no finished step yet" in app.screen.plain()


# ---- 3. step phases and notices --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"phase": "warmup", "warming_up": True}, "WARM-UP"),
        ({"phase": "measure"}, "MEASURING"),
        ({"phase": "closing", "closing_left": 12, "step_remaining_s": 0.0}, "CLOSING (12 left)"),
        ({"phase": "settling", "surplus": 48}, "SETTLING (48 surplus)"),
        (
            {"phase": "idle", "state": "finished", "level": 0, "in_flight": 0},
            "FINISHED  idle: press ↑ or l to start a step",
        ),
    ],
)
async def test_the_header_shows_the_step_phase(changes: dict[str, object], expected: str) -> None:
    app, _ = make_app(**changes)
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        assert expected in panel_text(app, "#status")


async def test_each_notice_is_toasted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    toasts: list[str] = []
    app, engine = make_app(notices=((1, "auto-ramp off — a to resume"),))
    monkeypatch.setattr(app, "notify", lambda message, **_: toasts.append(message))
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        assert toasts == ["auto-ramp off — a to resume"]
        later = ((1, "auto-ramp off — a to resume"), (2, "the plan has no next step"))
        await show(app, pilot, replace(engine.snapshot, seq=60, notices=later))
        await show(app, pilot, replace(engine.snapshot, seq=61, notices=later[1:]))
        assert toasts == ["auto-ramp off — a to resume", "the plan has no next step"]


async def test_windows_say_warm_up_and_that_the_run_leaves_warm_ups_out() -> None:
    app, _ = make_app(phase="warmup", warming_up=True)
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        left = app.screen.query_one("#hist-left", SnapshotPanel)
        assert left.border_title == "TTFT · this step (warm-up)"
        assert "this step (warm-up):" in panel_text(app, "#control")
        await pilot.press("w", "w")
        assert left.border_title == "TTFT · whole run (no warm-ups)"
        assert "whole run (no warm-ups):" in panel_text(app, "#control")


async def test_a_finished_plan_in_the_console_invites_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    toasts: list[str] = []
    app, _ = make_app(state="finished", phase="idle", level=0, in_flight=0)
    monkeypatch.setattr(app, "notify", lambda message, **_: toasts.append(message))
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        assert any("press ↑ or l to start a step" in toast for toast in toasts)


# ---- 4. marks on the timeline ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), SIZE, (160, 48)])
async def test_marks_are_drawn_on_the_throughput_timeline(size: tuple[int, int]) -> None:
    app, _ = make_app()
    async with app.run_test(size=size) as pilot:
        await show(app, pilot)
        await pilot.press("2")
        text = panel_text(app, "#throughput-panel")
        assert "⚑" in text and "bumped" in text


# ---- 5. the throughput-latency curve ---------------------------------------------------------------------


def flat_steps(count: int, ttft: float = 300.0) -> tuple[StepSummary, ...]:
    return tuple(step(i, 8 * (i + 1), 1000.0 + 100.0 * i, ttft / 2.1, True) for i in range(count))


def plot_area(text: str) -> str:
    """The curve's cells: the rows between the title and the x axis, right of the y axis."""
    rows = text.splitlines()[1:-2]
    return "\n".join(row.split("│", 1)[1] for row in rows if "│" in row)


async def test_curve_has_distinct_markers_and_a_legend() -> None:
    steps = (*judged_steps(), replace(STEPS[0], index=5, verdict=SLOVerdict(None)))
    app, _ = make_app(steps=steps, best_step=2)
    async with app.run_test(size=(80, 24)) as pilot:
        await show(app, pilot)
        await pilot.press("5")
        area = plot_area(panel_text(app, "#curve-panel"))
        for kind in ("met", "miss", "none", "best"):
            assert MARKERS[kind] in area, kind
        legend = str(app.screen.query_one("#curve-panel", SnapshotPanel).border_subtitle)
        for words in ("● met", "✕ miss", "○ no SLO", "★ best"):
            assert words in legend


def test_curve_labels_never_fuse_and_no_point_is_hidden() -> None:
    steps = flat_steps(12)
    steps = (*steps, replace(steps[-1], index=12))  # the same figures twice: two markers
    area = plot_area(render_curve(steps, None, "out_tok_s", 40, 12).plain)
    numbers = re.findall(r"\d+", area)
    assert all(1 <= int(n) <= 13 for n in numbers), numbers  # never "912"
    assert len(numbers) == len(set(numbers))
    assert sum(area.count(glyph) for glyph in MARKERS.values()) == len(steps)


def test_one_outlier_does_not_squash_the_rest() -> None:
    ttfts = (100.0, 130.0, 170.0, 220.0, 60_000.0)
    steps = tuple(
        replace(s, stats=replace(s.stats, hist={**s.stats.hist, "ttft_ms": scaled(s, ttft)}))
        for s, ttft in zip(flat_steps(5), ttfts, strict=True)
    )
    text = render_curve(steps, None, "out_tok_s", 40, 14).plain
    rows = [row.split("│", 1)[1] for row in text.splitlines()[1:-2] if "│" in row]
    marked = [i for i, row in enumerate(rows) if any(g in row for g in MARKERS.values())]
    assert len(marked) >= 4  # the four ordinary steps spread over rows, not all on the floor
    assert "↑" in rows[0]  # the outlier at the top edge, pointed at
    assert fmt_ms(60_000.0) not in text.splitlines()[1]  # the axis is not stretched to it


def scaled(s: StepSummary, p95: float) -> object:
    view = s.stats.hist["ttft_ms"]
    return replace(view, pct=replace(view.pct, p95=p95))


# ---- 6. the steps table at 120x36 ------------------------------------------------------------------------


async def test_steps_table_keeps_its_key_columns_at_120x36() -> None:
    app, _ = make_app(steps=judged_steps(), best_step=2)
    async with app.run_test(size=SIZE) as pilot:
        await show(app, pilot)
        table = panel_text(app, "#steps-panel")
        header = table.splitlines()[0].split()
        for column in ("#", "level", "tok/s", "dec", "p95", "e2e", "SLO"):  # issue 21: the core ones
            assert column in header, (column, header)
        rows = step_rows(table)
        assert set(rows) >= {"2", "3", "4", "5"}
        # the failing clause stays; at 120x36 "miss" is written ✕ so the core columns fit
        assert ("miss ITL p99" in rows["5"] or "✕ ITL p99" in rows["5"]) and "met" in rows["3"]


CORE_COLUMNS = ("#", "level", "tok/s", "dec p50", "TTFT p50", "TTFT p95", "e2e p95", "err", "SLO")


@pytest.mark.parametrize("size", [(120, 36), (160, 48)])
async def test_hand_steered_steps_keep_the_core_columns_and_the_cut_note(size: tuple[int, int]) -> None:
    """Issue 30: after hand-steering at 160x48 err and TTFT p50 vanished and the notes cut "cut N%" away.
    Every step both client-bound and cut, and one failing its SLO: the longest cells a hand-steered run has."""
    steps = tuple(replace(s, client_bound=True, carried_share=0.23) for s in judged_steps())
    app, _ = make_app(steps=steps, best_step=2)
    async with app.run_test(size=size) as pilot:
        await show(app, pilot)
        table = panel_text(app, "#steps-panel")
        header = table.splitlines()[0]
        for column in CORE_COLUMNS:
            assert column in header, (column, header)
        rows = step_rows(table)
        assert all("cut 23%" in row for row in rows.values()), table
        assert "ITL p99" in rows["5"], table


# ---- 7. the full text of errors --------------------------------------------------------------------------


async def test_the_latest_error_per_kind_is_readable_in_full() -> None:
    latest = {"http_status": LONG_ERROR, "stream_cut": "stream cut after 112 tokens: connection reset"}
    app, _ = make_app(latest_errors=latest, recent_errors=(LONG_ERROR,))
    async with app.run_test(size=(80, 24)) as pilot:
        await show(app, pilot)
        await pilot.press("e")
        assert isinstance(app.screen, ErrorsDetail)
        text = flat(app.screen.plain())
        assert flat(LONG_ERROR) in text and "connection reset" in text
        await pilot.press("escape")
        assert isinstance(app.screen, ConsoleScreen)
        await pilot.press("6")
        subtitle = str(app.screen.query_one("#errors-panel", SnapshotPanel).border_subtitle)
        assert "e" in subtitle and "full text" in subtitle


# ---- 8. the server panel ---------------------------------------------------------------------------------


async def test_server_ttft_sits_beside_the_clients_only_over_one_request_set() -> None:
    steps = judged_steps()
    app, _ = make_app(steps=steps)
    async with app.run_test(size=(80, 24)) as pilot:
        await show(app, pilot)
        await pilot.press("3")
        lines = panel_text(app, "#server-panel").splitlines()
        live = next(line for line in lines if "380 ms" in line)
        assert "server's window" in live  # its own window, labelled so
        assert not any("371 ms" in line for line in lines)  # no live pairing with the client's step
        pair = [line for line in lines if "step 3" in line]
        client_p95 = fmt_ms(steps[2].stats.pct("ttft_ms").p95)
        assert any("655 ms" in line for line in pair) and any(client_p95 in line for line in pair)


async def test_no_pair_without_the_servers_figure_for_a_finished_step() -> None:
    app, _ = make_app(steps=STEPS)
    async with app.run_test(size=(80, 24)) as pilot:
        await show(app, pilot)
        await pilot.press("3")
        text = panel_text(app, "#server-panel")
        assert "client" not in text and "server's window" in text


async def test_a_failing_gpu_command_shows_its_reason() -> None:
    reason = "gpu command exit 127: sh: 1: nvidia-smi: not found"
    server = replace(server_telemetry(), gpus=(), sources={"vllm /metrics": "ok", "gpu-cmd": reason})
    app, _ = make_app(server=server)
    async with app.run_test(size=(80, 24)) as pilot:
        await show(app, pilot)
        await pilot.press("3")
        lines = panel_text(app, "#server-panel").splitlines()
        named = [line for line in lines if "gpu-cmd" in line]
        assert named and all("exit 127" in line for line in named if "n/a" in line)
        assert any(line.startswith("gpu-cmd") and "exit 127" in line for line in named)
        await pilot.press("e")
        assert reason in flat(app.screen.plain())


def test_a_steps_own_latest_error_comes_before_the_runs() -> None:
    own = replace(judged_steps()[-1], latest_errors={"http_status": "HTTP 400: the step's own message"})
    text = flat(plain(step_report(own, make_snapshot().slo, {"http_status": LONG_ERROR}, best=False), 120))
    assert "the step's own message" in text and flat(LONG_ERROR) not in text
    bare = flat(
        plain(
            step_report(judged_steps()[-1], make_snapshot().slo, {"http_status": LONG_ERROR}, best=False), 120
        )
    )
    assert "(the run's latest) " + flat(LONG_ERROR) in bare


def test_a_wide_y_label_never_pushes_a_curve_row_past_the_panel() -> None:
    steps = tuple(
        replace(s, stats=replace(s.stats, hist={**s.stats.hist, "ttft_ms": scaled(s, ttft)}))
        for s, ttft in zip(flat_steps(3), (39.0, 55.5, 67.8), strict=True)
    )
    text = render_curve(steps, 2, "out_tok_s", 36, 10, slo_ttft_p95_ms=1000.0).plain
    assert fmt_ms(67.8 * 1.05) == "71.2 ms"  # seven cells: wider than "1.01 s"
    assert all(len(line) <= 36 for line in text.splitlines())
    top = text.splitlines()[1]
    assert top.startswith("71.2 ms │") and top.rstrip().endswith("★3")


async def test_the_clients_full_reason_is_in_the_errors_view() -> None:
    reason = (
        "load worker waited for a CPU 21% of the time (loop lag over 5 ms in 6% of samples, max 15 ms): "
        "other processes hold this machine's cores; run ramp on another host"
    )
    app, _ = make_app(
        health=ClientHealth(loop_lag_ms_p99=9.0, cpu_pct=(40.0,), client_bound=True, reason=reason)
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await show(app, pilot)
        assert reason not in flat(panel_text(app, "#control"))  # cut at 80 columns
        await pilot.press("e")
        assert "client-bound: " + reason in flat(app.screen.plain())
