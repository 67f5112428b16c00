"""The console in front of a room (issue 30): what an operator reads off the screen without help — axis
numbers on a histogram of a handful of samples, dots instead of full-height blocks for them, p95 kept when
labels collide, and the pure lines the header, steps table and footer draw."""

from __future__ import annotations

import re
import time
from dataclasses import replace

import pytest
from rich.color import ColorSystem
from rich.console import RenderableType
from rich.style import Style
from textual.widgets import Label, Static
from tui_fakes import FakeEngine, judged_steps, make_snapshot, server_telemetry, text_of, window

import tui.detail as detail_module
from loadgen.format import fmt_count, fmt_ms
from loadgen.report import format_step_table
from loadgen.snapshot import ClientHealth, GPUSample, HistogramView, Percentiles, Snapshot
from tui.app import RampApp, sixteen_colours
from tui.console import ConsoleScreen
from tui.detail import ErrorsDetail, StepDetail
from tui.footer import ConsoleFooter
from tui.histogram import render_histogram
from tui.histogram_panel import HistogramPanel
from tui.panel import SnapshotPanel
from tui.server import ServerPanel
from tui.status import progress_line
from tui.step_report import step_report
from tui.throughput import ThroughputPanel
from tui.view import ViewState

# Mocks of the first seconds of a step: 2, 6 and 12 samples in a narrow 52-72 ms span, where no 1-2-5
# decade tick lies; p95 == p99 at a handful of samples (one column, one label).
FEW = (
    (((52.0, 54.0, 1), (58.0, 60.0, 1)), (53.0, 59.0, 59.0, 59.0)),
    (((52.0, 54.0, 3), (56.0, 58.0, 2), (60.0, 62.0, 1)), (53.0, 61.0, 61.0, 61.0)),
    (((52.0, 54.0, 5), (56.0, 58.0, 4), (60.0, 62.0, 2), (70.0, 72.0, 1)), (55.0, 61.0, 71.0, 71.0)),
)


def few_view(
    bins: tuple[tuple[float, float, int], ...], pct: tuple[float, float, float, float]
) -> HistogramView:
    p50, p95, p99, top = pct
    count = sum(b[2] for b in bins)
    return HistogramView("ttft_ms", "ms", Percentiles(count=count, p50=p50, p95=p95, p99=p99, max=top), bins)


@pytest.mark.parametrize(("bins", "pct"), FEW)
@pytest.mark.parametrize(("width", "height"), [(40, 10), (30, 5), (24, 7)])
def test_a_histogram_of_a_few_samples_has_two_axis_numbers(
    bins: tuple[tuple[float, float, int], ...],
    pct: tuple[float, float, float, float],
    width: int,
    height: int,
) -> None:
    lines = render_histogram(few_view(bins, pct), width, height).plain.split("\n")
    numbers = re.findall(r"\d+(?:\.\d+)?m?s", lines[-1])
    assert len(numbers) >= 2, lines


@pytest.mark.parametrize(("bins", "pct"), FEW)
def test_a_few_samples_are_dots_not_full_height_blocks(
    bins: tuple[tuple[float, float, int], ...], pct: tuple[float, float, float, float]
) -> None:
    view = few_view(bins, pct)
    text = render_histogram(view, 40, 10).plain
    assert "█" not in text and "▇" not in text
    assert text.count("•") == min(view.pct.count, sum(min(b[2], 5) for b in bins))
    # a full step's samples are still bars
    many = HistogramView(
        "ttft_ms",
        "ms",
        Percentiles(count=60, p50=55, p95=61, p99=71, max=72),
        tuple((lo, hi, n * 5) for lo, hi, n in bins),
    )
    assert "█" in render_histogram(many, 40, 10).plain


def test_colliding_labels_keep_the_slos_percentile() -> None:
    bins, pct = FEW[0]  # p95 == p99: one column, one label
    labels = render_histogram(few_view(bins, pct), 40, 10).plain.split("\n")[-2]
    assert "95" in labels and "99" not in labels
    on_p99 = render_histogram(few_view(bins, pct), 40, 10, threshold=(80.0, "SLO p99 ≤ 80 ms"))
    assert "99" in on_p99.plain.split("\n")[-2]


# ---- 16 colours (TERM=linux) ------------------------------------------------------------------------------


def colour_number(style: Style) -> int | None:
    """The palette entry a 16-colour terminal draws the style's colour in."""
    color = style.color
    return None if color is None else color.downgrade(ColorSystem.STANDARD).number


async def test_sixteen_colours_keep_p95_sparklines_and_keys_off_the_breach_red(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30: with TERM=linux the theme's orange (p95, sparklines, footer keys) fell on the palette's
    bright red, the colour of a bin past the SLO."""
    monkeypatch.setenv("TERM", "linux")
    app = RampApp(refresh_hz=4.0)
    app.attach(FakeEngine(make_snapshot(), on_snapshot=app.snapshot_callback))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        hist = app.screen.query_one("#hist-left", HistogramPanel)
        breach = colour_number(hist.style_of("histogram--slo"))
        assert breach is not None and breach == colour_number(hist.style_of("histogram--bar-bad"))
        parts = {
            "p95": hist.style_of("histogram--p95"),
            "p50": hist.style_of("histogram--p50"),
            "bar": hist.style_of("histogram--bar"),
            "sparkline": app.screen.query_one(ThroughputPanel).style_of("throughput--spark"),
            "server sparkline": app.screen.query_one(ServerPanel).style_of("server--spark"),
            "footer key": app.screen.query("FooterKey").first().get_component_rich_style("footer-key--key"),
        }
        for name, style in parts.items():
            assert colour_number(style) != breach, name


# ---- the header, control lines, help and the server panel, as a room reads them -----------------------


def console(**changes: object) -> RampApp:
    app = RampApp(refresh_hz=4.0)
    app.attach(FakeEngine(make_snapshot(**changes), on_snapshot=app.snapshot_callback))
    return app


async def drawn(app: RampApp, size: tuple[int, int], selector: str) -> str:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.redraw(force=True)
        await pilot.pause()
        return text_of(app.screen.query_one(selector, SnapshotPanel))


async def test_steps_past_the_plan_read_as_plan_progress() -> None:
    status = await drawn(console(step_index=10, step_count=9), (160, 48), "#status")
    assert "step 11/9" not in status and "step 11 · plan 9/9 done" in status, status
    assert "step 5/8" in await drawn(console(), (160, 48), "#status")


async def test_open_loop_rates_say_sent_and_done() -> None:
    young = replace(window("step", 0.4), duration_s=30.0, req_s=0.99)
    app = console(mode="open", rate_rps=12.0, achieved_rps=12.0, arrival="poisson", windows={"step": young})
    control = await drawn(app, (160, 48), "#control")
    assert "sent 12.0/s" in control and "done 0.99/s" in control, control
    assert "achieved" not in control


@pytest.mark.parametrize(
    "state", [dict(phase="closing"), dict(state="finished", phase="idle"), dict(state="stopped")]
)
async def test_no_req_s_warming_once_the_step_no_longer_measures(state: dict[str, object]) -> None:
    young = replace(window("step", 0.4), duration_s=1.0)  # e2e p50 3.9 s: a measuring step would be warming
    assert "req/s warming" in await drawn(console(windows={"step": young}), (160, 48), "#control")
    control = await drawn(console(windows={"step": young}, **state), (160, 48), "#control")
    assert "warming" not in control, control


async def test_the_help_says_there_is_more_below() -> None:
    app = console()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        scroll = app.screen.query_one("#help-scroll")
        assert scroll.max_scroll_y > 0
        assert "more below" in str(scroll.border_subtitle)
        scroll.scroll_end(animate=False)
        await pilot.pause(0.2)
        assert "more below" not in str(scroll.border_subtitle)


async def test_a_gpu_name_is_whole_on_a_wide_screen() -> None:
    gpu = GPUSample(0, "NVIDIA H200 (simulated)", mem_used_mib=21_000.0, mem_total_mib=143_771.0)
    app = console(server=replace(server_telemetry(), gpus=(gpu,)))
    server = await drawn(app, (220, 60), "#server-panel")
    assert "GPU0 H200 (simulated)" in server, server


async def test_m_on_ttftc_says_no_tool_calls_were_made() -> None:
    said: list[str] = []
    app = console()
    app.notify = lambda message, **_: said.append(str(message))  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        while app.view.left_metric != "ttftc_ms":
            await pilot.press("m")
        await pilot.pause()
        assert "no tool calls were made" in said[-1], said
        panel = text_of(app.screen.query_one("#hist-left", SnapshotPanel))
        assert "no tool calls were made" in panel, panel


def test_the_exit_table_says_wait_max_8_not_8_00() -> None:
    steps = [replace(s, server={"waiting_max": 8.0}) for s in judged_steps()]
    table = format_step_table(steps, 2, width=200)
    header, *rows = table.splitlines()
    assert "wait max" in header
    assert any(re.search(r"\b8\b", row) for row in rows) and "8.00" not in table, table


# ---- modal screens under load -----------------------------------------------------------------------------


async def test_a_detail_screen_is_drawn_first_and_rebuilt_only_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30: at load ~10 with 128 streams d, e and escape took 3-4 s: the report was built before the
    screen was drawn, rebuilt on every redraw, and the panels behind the modal redrew too. Now the modal
    comes up with a placeholder, the step view is built once per change, the panels wait behind it and
    catch up as it closes."""
    builds: list[str] = []
    shows: list[int] = []
    build, show = StepDetail.build, ConsoleScreen.show

    def counted_build(self: StepDetail, snapshot: Snapshot) -> tuple[str, RenderableType]:
        builds.append(str(self.query_one("#detail-body", Static).render()))  # what was on screen before
        return build(self, snapshot)

    def counted_show(self: ConsoleScreen, snapshot: Snapshot, view: ViewState, **kw: bool) -> None:
        shows.append(snapshot.seq)
        show(self, snapshot, view, **kw)

    monkeypatch.setattr(StepDetail, "build", counted_build)
    monkeypatch.setattr(ConsoleScreen, "show", counted_show)
    app = RampApp(refresh_hz=4.0)
    engine = FakeEngine(make_snapshot(steps=judged_steps()), on_snapshot=app.snapshot_callback)
    app.attach(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, StepDetail)
        assert builds == ["…"]  # pushed with a placeholder, filled after its first paint
        shows.clear()
        for seq in range(2, 7):  # new snapshots, the same finished steps
            engine.snapshot = replace(engine.snapshot, seq=seq)
            engine.publish()
            app.redraw(force=True)
            await pilot.pause()
        assert len(builds) == 1 and shows == []
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConsoleScreen) and shows and shows[-1] == 6


async def test_a_redraw_between_pushing_a_detail_screen_and_its_compose_is_harmless() -> None:
    """Under load the bench's e right after d ended the console: NoMatches '#detail-title' on StepDetail (a
    redraw reached a detail screen that was pushed but not composed, or being taken down)."""
    app = RampApp(refresh_hz=4.0)
    engine = FakeEngine(make_snapshot(steps=judged_steps()), on_snapshot=app.snapshot_callback)
    app.attach(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.action_step_detail()
        app.redraw(force=True)  # before the screen composed
        await pilot.pause()
        app.action_error_detail()
        app.redraw(force=True)
        await pilot.pause(0.2)
        assert isinstance(app.screen, ErrorsDetail) and app.is_running
        assert "Errors in full" in str(app.screen.query_one("#detail-title", Label).render())


@pytest.mark.parametrize("width", [80, 100])
def test_a_replay_header_keeps_its_step_n_of_m(width: int) -> None:
    """docs/console.md: in replay "the header says REPLAY and step 2/3"; a record that ended with a message
    and a client-bound step lost it below 120 columns (the message's piece outlasted it, then went too)."""
    looked_at = make_snapshot(
        selected=1,
        step_index=1,
        step_count=3,
        state="stopped",
        message="stopped by the operator (q) after 2 of 3 steps",
        health=ClientHealth(client_bound=True, reason="load worker at 99% CPU"),
    )
    line = progress_line(looked_at, width, {}).plain
    assert "REPLAY" in line and "step 2/3" in line, line


def test_sixteen_colours_are_told_by_term_or_by_a_terminal_in_16_colours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    assert sixteen_colours("standard") and not sixteen_colours("truecolor") and not sixteen_colours("256")
    assert not sixteen_colours("standard", headless=True)  # tests and screenshots: the same on every machine
    monkeypatch.setenv("TERM", "linux")
    assert sixteen_colours("truecolor", headless=True)


async def test_the_step_detail_is_on_screen_before_its_slow_report_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30, d under load: the modal is the active screen after one pause and its own frame (title and
    placeholder) is laid out, which Textual does in the pass that paints it, before its report is built,
    however slow the build; the report then shows the step's own figures. The screen is opaque, so that
    none of its frames draws the console again under it."""
    seen_by_build: list[tuple[object, str, int]] = []  # (the screen, its title, the title's width) then

    def slow_report(*args: object, **kwargs: object) -> RenderableType:
        title = app.screen.query_one("#detail-title", Label)
        seen_by_build.append((type(app.screen), str(title.render()), title.region.width))
        time.sleep(0.3)  # a loaded machine: the report takes a while
        return step_report(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(detail_module, "step_report", slow_report)
    app = RampApp(refresh_hz=4.0)
    steps = judged_steps()
    app.attach(FakeEngine(make_snapshot(steps=steps), on_snapshot=app.snapshot_callback))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StepDetail)
        for _ in range(100):
            if seen_by_build and "TTFT" in screen.plain():
                break
            await pilot.pause(0.05)
        assert seen_by_build, "the report was never built"
        shown, title, width = seen_by_build[0]
        assert shown is StepDetail and title == "Step details" and width > 0, seen_by_build
        assert screen.styles.background.a == 1  # opaque: Textual draws no console under it
        last = steps[-1]
        report = screen.plain()
        ttft = last.stats.hist["ttft_ms"].pct
        assert f"step {last.index + 1}" in report and f"of {len(steps)} finished" in str(
            screen.query_one("#detail-title", Label).render()
        )
        for name, value in (("p95", ttft.p95), ("p99", ttft.p99)):  # the TTFT column comes first
            assert re.search(rf"^{name}\s+{re.escape(fmt_ms(value))} ", report, re.M), report
        assert f"ok {fmt_count(last.stats.ok)}" in report, report


async def test_the_footer_is_rebuilt_only_when_the_keys_it_shows_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 30: Textual's footer rebuilt all its keys (~30 ms, five times that under load) as d or e covered
    the console and again as escape uncovered it, its keys unchanged. Now neither rebuilds it, nor a
    refresh of the bindings that changes nothing; one that changes what it shows (the level prompt open:
    the steering keys hidden) still does."""
    rebuilt: list[str] = []
    recompose = ConsoleFooter.recompose

    async def counted(self: ConsoleFooter) -> None:
        rebuilt.append(type(self.app.screen).__name__)
        await recompose(self)

    monkeypatch.setattr(ConsoleFooter, "recompose", counted)
    app = RampApp(refresh_hz=4.0)
    app.attach(FakeEngine(make_snapshot(steps=judged_steps()), on_snapshot=app.snapshot_callback))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        footer = app.screen.query_one(ConsoleFooter)
        keys = [str(key.render()) for key in footer.query("FooterKey")]
        rebuilt.clear()
        for key in ("d", "escape", "e", "escape", "question_mark", "escape"):
            await pilot.press(key)
            await pilot.pause(0.2)
        assert isinstance(app.screen, ConsoleScreen) and rebuilt == [], rebuilt
        assert [str(key.render()) for key in footer.query("FooterKey")] == keys and keys
        app.refresh_bindings()  # a refresh that changes nothing (Textual's, on a focus change)
        await pilot.pause(0.2)
        assert rebuilt == [], rebuilt
        await pilot.press("l")  # the level prompt: the steering keys are off while it is open
        app.refresh_bindings()
        await pilot.pause(0.3)
        assert rebuilt, "the footer kept keys that changed"
        shown = [str(key.render()) for key in footer.query("FooterKey")]
        assert "l Set" in keys and "l Set" not in shown and "? Help" in shown, shown
