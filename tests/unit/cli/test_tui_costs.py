"""The console's steps table prices each step and shows goodput and repeats (issue 11: cost and goodput live
in the console, repeats as "median (min–max)"). Numbers are checked by hand, not against the code's own."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from tui_fakes import STEPS, make_snapshot, step

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.profile import Pricing
from loadgen.snapshot import StepSummary
from tui.steps import COST, GOOD, Pricer, StepsPanel, fitting_columns, render_steps_table

URL = "http://127.0.0.1:9"


def _text(steps: tuple[StepSummary, ...], width: int | None, pricer: Pricer | None) -> str:
    console = Console(width=200, record=True)
    console.print(render_steps_table(steps, 0, 20, width=width, pricer=pricer))
    return console.export_text()


def test_gpu_hours_price_each_step_per_1m_output_tokens() -> None:
    # $3.60 per GPU hour, 2 GPUs: $0.002 per second; step 1 makes 1,480 tok/s:
    # 0.002 / 1480 * 1e6 = $1.3514 per 1M output tokens.
    pricer = Pricer(Pricing(gpu_usd_per_hour=3.6, gpus=2))
    assert pricer.per_1m_output(STEPS[0]) == "$1.35"
    text = _text(STEPS, None, pricer)
    assert COST in text and "$1.35" in text
    # step 4 at 5,020 tok/s: 0.002 / 5020 * 1e6 = $0.398
    assert "$0.398" in text


def test_token_prices_bill_cached_prompt_tokens_at_the_cache_read_rate() -> None:
    # The fake step: 2,000 requests of 512 prompt tokens (100 of them cached) and 256 output tokens.
    # Uncached 2000*412 = 824,000 at $0.30, cached 200,000 at $0.03, output 512,000 at $1.20 per 1M:
    # 0.2472 + 0.006 + 0.6144 = $0.8676 for 0.512M output tokens = $1.6945 per 1M.
    pricer = Pricer(Pricing(usd_per_1m_input=0.30, usd_per_1m_output=1.20, usd_per_1m_cache_read=0.03))
    assert pricer.per_1m_output(STEPS[0]) == "$1.69"


def test_no_price_no_cost_column_and_goodput_only_when_measured() -> None:
    assert COST not in _text(STEPS, None, None)
    assert GOOD not in _text(STEPS, None, None)  # no step has a goodput (no per-request SLO limits)
    good = tuple(replace(s, stats=replace(s.stats, goodput_req_s=4.25)) for s in STEPS)
    text = _text(good, None, None)
    assert GOOD in text and "4.25/s" in text


def test_cost_and_goodput_give_way_first_on_a_narrow_panel() -> None:
    good = tuple(replace(s, stats=replace(s.stats, goodput_req_s=4.25)) for s in STEPS)
    pricer = Pricer(Pricing(gpu_usd_per_hour=3.6))
    wide = [c.header for c in fitting_columns(good, None, pricer=pricer)]
    narrow = [c.header for c in fitting_columns(good, 60, pricer=pricer)]
    assert COST in wide and GOOD in wide
    assert COST not in narrow and GOOD not in narrow
    assert {"#", "level", "tok/s", "dec p50", "TTFT p95", "e2e p95", "SLO"} <= set(narrow)


def test_a_repeated_level_shows_median_and_range_in_the_subtitle() -> None:
    repeats = (
        replace(step(0, 16, 2700.0, 100.0, True), repeat=0),
        replace(step(1, 16, 2800.0, 100.0, True), repeat=1),
        replace(step(2, 16, 2710.0, 100.0, True), repeat=2),
    )
    panel = StepsPanel()
    panel.update_titles(make_snapshot(steps=repeats, best_step=1), view=None)  # type: ignore[arg-type]
    # median of 2,700 / 2,800 / 2,710 is 2,710; range 2,700–2,800
    assert "×3: 2.71k (2.70k–2.80k) tok/s" in str(panel.border_subtitle)
    panel.update_titles(make_snapshot(steps=repeats[:1], best_step=0), view=None)  # type: ignore[arg-type]
    assert "×" not in str(panel.border_subtitle) and "2.70k tok/s" in str(panel.border_subtitle)


def test_the_run_flags_price_the_console() -> None:
    args = build_parser().parse_args(["run", URL, "--gpu-usd-per-hour", "3.6", "--gpus", "2"])
    pricer = Pricer.of(build_config(args, URL))
    assert pricer is not None and pricer.per_1m_output(STEPS[0]) == "$1.35"
    assert Pricer.of(build_config(build_parser().parse_args(["run", URL]), URL)) is None
