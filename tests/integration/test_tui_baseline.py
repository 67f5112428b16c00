"""The live baseline (``ramp URL --baseline RECORD``, issue 11 item 8): the conditions check against what
the live run is known to run under (a mismatch warns, never refuses), the baseline's levels as ghosts on the
curve and its percentiles as ghosts on the histograms at the run's current level, and each finished step's
"better / worse / within noise" against the baseline (``ramp compare``'s noise rule), in the steps table.

Baselines are records written through ``loadgen.record``'s writer: the header the live run's config plans
(``tui.baseline.planned_header``) with the server's identity the fake snapshot reports, and step lines
from ``tui_fakes``' steps with the figures each test needs; and one real record, of a short run against the
embedded simulator, held against the same command."""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console, RenderableType
from tui_fakes import STEPS, FakeEngine, make_snapshot, step

from loadgen.analysis.baseline import (
    THROUGHPUT,
    baseline_problem,
    ghost_points,
    live_differences,
    load_baseline,
    mismatch_warning,
    percentiles_at,
    slo_figure,
    step_verdict,
)
from loadgen.analysis.runs import LevelKey
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.config import SLO
from loadgen.exits import UsageError
from loadgen.record import RecordWriter
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.run.protocol import SetLevel
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.snapshot import StepSummary
from tui.app import RampApp
from tui.baseline import LiveBaseline, planned_header, verdict_cell, verdict_lines
from tui.curve import GHOST, render_curve
from tui.detail import ErrorsDetail, StepDetail
from tui.histogram import GHOST_GLYPH, MARKER_GLYPH, render_histogram
from tui.panel import SnapshotPanel
from tui.steps import render_steps_table

URL = "http://127.0.0.1:8000"
IDENTITY = {"model": "meta-llama/Llama-3.1-8B-Instruct", "runtime": "vllm", "runtime_version": "0.8.5"}


def live_config(tmp_path: Path, baseline: Path | None = None, **flags: Any) -> RunConfig:
    values: dict[str, Any] = {"steps": (8.0, 16.0, 32.0, 64.0), "out": str(tmp_path / "now.jsonl")}
    values.update(flags)
    if baseline is not None:
        values["baseline"] = str(baseline)
    return resolve(RunFlags(**values), URL)


def baseline_steps() -> list[StepSummary]:
    """8 streams once (lower tok/s), 16 three times (higher tok/s), 32 twice around the live 4,390; no 64."""
    return [
        step(0, 8, 1300.0, 100.0, True),
        step(1, 16, 3000.0, 110.0, True),
        replace(step(2, 16, 3100.0, 112.0, True), repeat=1),
        replace(step(3, 16, 3050.0, 111.0, True), repeat=2),
        step(4, 32, 4300.0, 200.0, True),
        replace(step(5, 32, 4500.0, 220.0, True), repeat=1),
    ]


def write_baseline(
    path: Path, config: RunConfig, steps: list[StepSummary] | None = None, **header: Any
) -> Path:
    with RecordWriter(path) as writer:
        writer.write_header({**planned_header(config), **IDENTITY, **header})
        for summary in baseline_steps() if steps is None else steps:
            writer.write_step(summary, {})
    return path


def matched(tmp_path: Path, **header: Any) -> tuple[RunConfig, Path]:
    """A baseline written for the live run's own conditions (``header`` changed), and the run's config."""
    planned = live_config(tmp_path)
    path = write_baseline(tmp_path / "base.jsonl", planned, **header)
    return live_config(tmp_path, path), path


def plain(renderable: RenderableType, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


# ---- the conditions check ---------------------------------------------------------------------------------


def test_a_baseline_run_under_the_same_conditions_warns_of_nothing(tmp_path: Path) -> None:
    config, path = matched(tmp_path)
    baseline = LiveBaseline.open(str(path), config)
    assert baseline.warnings(make_snapshot()) == ()
    assert baseline.annotate(make_snapshot()).warnings == ()


def test_what_the_run_does_not_know_yet_is_not_held_against_it(tmp_path: Path) -> None:
    config, path = matched(tmp_path, server_conditions={"gpu_name": "H200", "gpu_count": 1})
    baseline = LiveBaseline.open(str(path), config)
    before_probe = make_snapshot(model="", runtime=None, runtime_version=None)
    assert baseline.warnings(before_probe) == ()
    other_runtime = make_snapshot(runtime="sglang", runtime_version="0.4.6")
    (warning,) = baseline.warnings(other_runtime)
    assert "runtime vllm vs sglang" in warning and "runtime_version 0.8.5 vs 0.4.6" in warning


def test_each_mismatch_kind_is_named_with_both_values(tmp_path: Path) -> None:
    planned = live_config(tmp_path)
    header = planned_header(planned)
    content = header["profile_content"]
    assert isinstance(content, dict)
    changed_profile = {**content, "sampling": {**content["sampling"], "temperature": 1.5}}
    base = write_baseline(
        tmp_path / "base.jsonl",
        planned,
        profile_content=changed_profile,
        slo={"ttft_p95_ms": 250.0},
        api="completions",
        plan={**dict(header["plan"]), "step_s": 60.0},  # type: ignore[call-overload]
        tags={"batch": "64"},
    )
    run = load_baseline(str(base))
    keys = {d.key: d.values for d in live_differences(run, {**header, **IDENTITY})}
    assert keys["profile.sampling.temperature"][0] == 1.5
    assert keys["slo"][0] == "ttft_p95_ms=250" and "ttft_p95_ms=1000" in str(keys["slo"][1])
    assert keys["api"] == ("completions", "chat")
    assert keys["step_s"] == (60.0, 30.0)
    assert keys["tag:batch"] == ("64", None)  # the run's tags are known before it: held against it
    assert "client_bound" not in keys  # judged per step
    warning = mismatch_warning("base.jsonl", live_differences(run, {**header, **IDENTITY})) or ""
    assert warning.startswith(
        "baseline base.jsonl was measured under other conditions (baseline vs this run)"
    )
    assert "profile.sampling.temperature 1.5 vs 0" in warning and "api completions vs chat" in warning


def test_a_record_that_is_not_a_baseline_is_refused_before_the_run(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    assert baseline_problem(str(missing)) == f"--baseline {missing}: no such file"
    with pytest.raises(UsageError, match="--baseline .*no such file"):
        live_config(tmp_path, missing)
    empty = tmp_path / "empty.jsonl"
    with RecordWriter(empty) as writer:
        writer.write_header(planned_header(live_config(tmp_path)))
    assert "no finished step" in (baseline_problem(str(empty)) or "")


def test_a_baseline_gone_by_the_time_the_console_starts_is_a_warning(tmp_path: Path) -> None:
    config, path = matched(tmp_path)
    path.unlink()
    baseline = LiveBaseline.open(str(path), config)
    (warning,) = baseline.warnings(make_snapshot())
    assert warning.startswith("baseline not shown:") and "no such file" in warning
    assert baseline.curve_points("out_tok_s") == [] and baseline.verdicts(STEPS, SLO()) == {}


def test_a_record_of_the_same_command_is_a_matched_baseline(tmp_path: Path) -> None:
    """A real run against the simulator, then the same command with --baseline: nothing to warn of (the
    planned header and the record's agree), the baseline's levels on the curve; another plan warns."""
    handle = run_sim_in_thread(build_config("h200-llama8b", seed=5))
    try:
        flags = RunFlags(steps=(1.0, 2.0), step_seconds=1.5, warmup=0.3, out=str(tmp_path / "a.jsonl"))
        engine = Engine(resolve(replace(flags, headless=True), handle.url))
        engine.start()
        outcome = engine.wait(60)
        assert outcome is not None and outcome.state == "finished", outcome
        final = engine.latest()
        assert final is not None and final.model == "sim-llama-8b"
        again = replace(flags, out=str(tmp_path / "b.jsonl"), baseline=str(tmp_path / "a.jsonl"))
        baseline = LiveBaseline.open(str(tmp_path / "a.jsonl"), resolve(again, handle.url))
        assert baseline.warnings(final) == ()
        assert [g.key.load for g in baseline.ghosts] == [1.0, 2.0]
        other = resolve(replace(again, steps=(1.0, 4.0), seed=7), handle.url)
        (warning,) = LiveBaseline.open(str(tmp_path / "a.jsonl"), other).warnings(final)
        assert "levels 1, 2 vs 1, 4" in warning and "seed fresh vs given 7" in warning
    finally:
        handle.stop()


# ---- levels, ghosts, verdicts -----------------------------------------------------------------------------


def test_each_level_is_one_ghost_at_the_median_of_its_repeats(tmp_path: Path) -> None:
    _, path = matched(tmp_path)
    points = ghost_points(load_baseline(str(path)))
    assert [(p.key.load, p.out_tok_s, p.repeats) for p in points] == [
        (8.0, 1300.0, 1),
        (16.0, 3050.0, 3),
        (32.0, 4400.0, 2),
    ]
    ttft_32 = [s.stats.pct("ttft_ms").p95 for s in baseline_steps()[4:]]
    assert points[2].ttft_p95_ms == pytest.approx(sum(v or 0.0 for v in ttft_32) / 2)
    p50 = percentiles_at(load_baseline(str(path)), LevelKey("closed", 16.0), "ttft_ms")
    assert p50["p50"] == 111.0 and set(p50) == {"p50", "p95", "p99"}
    assert percentiles_at(load_baseline(str(path)), LevelKey("closed", 64.0), "ttft_ms") == {}


def test_the_slo_figure_is_the_first_clause_else_ttft_p95() -> None:
    assert slo_figure(SLO()).key == "ttft_p95_ms"
    assert slo_figure(SLO(ttft_p99_ms=900.0, max_error_rate=0.01)).key == "ttft_p99_ms"
    assert slo_figure(SLO(itl_p99_ms=80.0)).key == "itl_p99_ms"
    assert slo_figure(SLO(max_error_rate=0.01)).key == "error_rate"


def test_each_step_is_better_worse_or_within_noise_by_compares_rule(tmp_path: Path) -> None:
    _, path = matched(tmp_path)
    run = load_baseline(str(path))
    figures = (THROUGHPUT, slo_figure(SLO(ttft_p95_ms=500.0)))
    at_8, at_16, at_32, at_64 = (step_verdict(run, STEPS, n, figures) for n in range(4))
    # 8 streams: 1,480 against one step of 1,300: better, but one step on each side gives no noise estimate
    tok = at_8.verdicts[0]
    assert (tok.word, tok.noise_known) == ("better", False) and tok.delta.pct == pytest.approx(13.846, 1e-3)
    assert verdict_cell(at_8) == "+14% better? · -5% better?"  # TTFT p95 5 % lower: better too
    # 16 streams: 2,710 below the baseline's 3,000-3,100: worse, and the baseline's range says so
    assert at_16.verdicts[0].word == "worse" and at_16.verdicts[0].noise_known
    # 32 streams: 4,390 inside 4,300-4,500: within noise; TTFT p95 on the baseline's median: the same
    assert [v.word for v in at_32.verdicts] == ["within noise", "same"]
    assert verdict_cell(at_32, compact=1) == "noise · same"
    assert at_64.verdicts == () and "no clean step at 64 streams" in at_64.reason
    assert verdict_cell(at_64) == "–"
    lines = verdict_lines(at_16, "base.jsonl")
    assert lines[0] == "vs baseline base.jsonl at 16 streams:"
    assert "out tok/s: 2,710 vs 3,050 (3,000–3,100) over 3 steps: -340 (-11.1%) worse" in lines[1]
    assert "no noise estimate" in verdict_lines(at_8, "b")[1]


def test_a_cut_step_gets_no_verdict_and_repeats_of_the_live_run_count_together(tmp_path: Path) -> None:
    _, path = matched(tmp_path)
    run = load_baseline(str(path))
    cut = replace(STEPS[0], carried_share=0.3)
    assert step_verdict(run, [cut], 0, (THROUGHPUT,)).reason == "cut by a change"
    repeats = [step(0, 8, 1250.0, 95.0, True), replace(step(1, 8, 1400.0, 95.0, True), repeat=1)]
    second = step_verdict(run, repeats, 1, (THROUGHPUT,)).verdicts[0]
    assert (second.live.n, second.live.low, second.live.high) == (2, 1250.0, 1400.0)
    assert second.word == "within noise"  # the live range 1,250-1,400 holds the baseline's 1,300


# ---- drawing ----------------------------------------------------------------------------------------------


def test_the_curve_draws_the_baselines_levels_as_ghosts() -> None:
    ghosts = [(1300.0, 200.0), (3050.0, 230.0), (4400.0, 440.0)]
    text = render_curve(STEPS, 2, "out_tok_s", 48, 14, ghosts=ghosts).plain
    assert text.count(GHOST) == 3
    assert render_curve(STEPS, 2, "out_tok_s", 48, 14).plain.count(GHOST) == 0
    alone = render_curve((), None, "out_tok_s", 48, 14, ghosts=ghosts).plain
    assert alone.count(GHOST) == 3  # the baseline's shape is there before the first step finishes


def test_the_histogram_draws_the_baselines_percentiles_as_ghosts() -> None:
    view = make_snapshot().windows["step"].hist["ttft_ms"]
    assert view.pct.p50 is not None
    ghosts = {"p50": view.pct.p50 * 0.5, "p95": view.pct.p50 * 1.6, "p99": view.pct.p50 * 3.5}
    axis = next(
        line for line in render_histogram(view, 60, 14, ghosts=ghosts).plain.splitlines() if "─" in line
    )
    assert axis.count(GHOST_GLYPH) == 3 and axis.count(MARKER_GLYPH) == 3
    far = {"p50": view.pct.p50 * 1000}  # off the axis: left out, not drawn on the edge
    assert GHOST_GLYPH not in render_histogram(view, 60, 14, ghosts=far).plain


def test_the_steps_table_says_each_step_against_the_baseline(tmp_path: Path) -> None:
    config, path = matched(tmp_path)
    verdicts = LiveBaseline.open(str(path), config).verdicts(STEPS, SLO(ttft_p95_ms=500.0))
    text = plain(render_steps_table(STEPS, 2, 12, width=120, verdicts=verdicts))
    assert "vs base" in text
    assert "+14% better? · -5% better?" in text and "-0.23% noise · 0% same" in text
    assert "-11% worse · +8% worse" in text
    assert "vs base" not in plain(render_steps_table(STEPS, 2, 12, width=120))


# ---- the console ------------------------------------------------------------------------------------------


class FullFakeEngine(FakeEngine):
    """The fake with every method of ``EngineControl``."""

    def interrupt(self, signum: int) -> None:
        self.calls.append(("interrupt", (signum,)))


def console_app(config: RunConfig, **snapshot: Any) -> tuple[RampApp, FakeEngine]:
    app = RampApp(refresh_hz=4.0, config=config)
    engine = FullFakeEngine(make_snapshot(**snapshot), on_snapshot=app.snapshot_callback)
    app.attach(engine)
    return app, engine


def panel_plain(app: RampApp, selector: str, width: int = 120) -> str:
    panel = app.screen_stack[0].query_one(selector, SnapshotPanel)
    title = f"{panel.border_title or ''}\n{panel.border_subtitle or ''}\n"
    return title + plain(panel.render(), width)


async def test_the_console_draws_the_baseline_and_judges_each_step(tmp_path: Path) -> None:
    config, _ = matched(tmp_path)
    app, _ = console_app(config)
    # 200 columns: the steps table's core columns take what 160 leave to the baseline's words (▲ ▼ ≈ there)
    async with app.run_test(size=(200, 50)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        curve = panel_plain(app, "#curve-panel")
        assert curve.count(GHOST) >= 4  # three in the plot, one in the legend
        assert f"{GHOST} baseline" in curve and "not matched" not in curve
        steps = panel_plain(app, "#steps-panel")
        assert "vs base: tok/s · TTFT p95" in steps
        assert "better?" in steps and "worse" in steps and "noise" in steps
        assert GHOST_GLYPH not in panel_plain(app, "#hist-left")  # at 64 streams: no baseline step there
        errors = panel_plain(app, "#errors-panel")
        assert "baseline" not in errors
        await pilot.press("d")  # the step detail view says it in words
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, StepDetail)
        text = " ".join(detail.plain().split())
        assert "at 64 streams: no verdict (baseline has no clean step at 64 streams)" in text
        await pilot.press("left", "left", "left")
        await pilot.pause()
        words = " ".join(detail.plain().split())
        assert "vs baseline" in words and "at 8 streams:" in words
        assert "out tok/s: 1,480 vs 1,300: +180 (+13.8%) better, no noise estimate" in words


async def test_ghost_percentiles_follow_the_level_the_run_is_at(tmp_path: Path) -> None:
    config, _ = matched(tmp_path)
    app, engine = console_app(config, level=16)
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        left = panel_plain(app, "#hist-left")
        assert f"{GHOST_GLYPH} baseline" in left and GHOST_GLYPH in left.split("\n", 2)[2]
        engine.send(SetLevel(64))
        app.redraw()
        await pilot.pause()
        assert GHOST_GLYPH not in panel_plain(app, "#hist-left").split("\n", 2)[2]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder with a short path: the warning names the baseline's file, and a long path (a pytest-xdist
    worker's tmp_path) would push the words the test reads past the panel's lines."""
    folder = Path(tempfile.mkdtemp(prefix="rb-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


async def test_a_mismatched_baseline_warns_on_screen_and_is_drawn_anyway(
    tmp_path: Path, short_dir: Path
) -> None:
    planned = live_config(tmp_path)
    path = write_baseline(short_dir / "base.jsonl", planned, profile="other", profile_content={"buckets": []})
    app, _ = console_app(live_config(tmp_path, path))
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        errors = " ".join(panel_plain(app, "#errors-panel", 60).split())  # wrapped where the path ends
        assert "baseline" in errors and "other conditions" in errors and "profile" in errors
        curve = panel_plain(app, "#curve-panel")
        assert "not matched" in curve and curve.count(GHOST) >= 4
        await pilot.resize_terminal(80, 24)  # the tabs' new panels keep the warning
        await pilot.pause()
        await pilot.press("6")
        await pilot.pause()
        assert "other conditions" in " ".join(panel_plain(app, "#errors-panel", 70).split())
        await pilot.press("e")  # and the errors in full
        await pilot.pause()
        full = app.screen
        assert isinstance(full, ErrorsDetail)
        assert "other conditions" in full.plain() and "profile in " in full.plain()


async def test_without_a_baseline_nothing_changes(tmp_path: Path) -> None:
    app, _ = console_app(live_config(tmp_path))
    async with app.run_test(size=(160, 48)) as pilot:
        app.redraw(force=True)
        await pilot.pause()
        assert GHOST not in panel_plain(app, "#curve-panel")
        assert "vs base" not in panel_plain(app, "#steps-panel")
