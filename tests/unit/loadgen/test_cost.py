"""Cost per 1M output tokens and per completed task, every figure checked by hand; where pricing comes from
(the profile's ``[pricing]``, the flags, the record header) and the report's cost columns."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from analysis_fakes import SESSION_TOML, Fig, header_with, profile_content, step_of, write_record

from loadgen.analysis.cost import describe_pricing, pricing_of, step_cost, task_turns
from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.config import SLO
from loadgen.exits import UsageError
from loadgen.format import fmt_usd
from loadgen.profile import Pricing
from loadgen.report import report_main
from loadgen.run.config import RunConfig
from loadgen.run.recording import record_header
from loadgen.run.state import Load, RunStatus

URL = "http://127.0.0.1:8000"
# The seed's managed-API example: DeepSeek V4.1 Flash, $ per 1M input / output / cache-read tokens.
DEEPSEEK = Pricing(usd_per_1m_input=0.30, usd_per_1m_output=1.20, usd_per_1m_cache_read=0.03)
GPU = Pricing(gpu_usd_per_hour=3.60, gpus=2)

# One step: 1,000 requests in a 100 s window, 1M prompt tokens (400k of them served from the prefix cache),
# 250k output tokens, i.e. 2,500 out tok/s.
STEP = Fig(
    level=8,
    ok=1000,
    window_s=100.0,
    input_tokens=1_000_000,
    cached_tokens=400_000,
    output_tokens=250_000,
    out_tok_s=2500.0,
)


def test_token_prices_bill_cached_prompt_tokens_at_the_cache_read_rate() -> None:
    cost = step_cost(step_of(0, STEP), DEEPSEEK).tokens
    assert cost is not None
    # 600k uncached x $0.30 + 400k cached x $0.03 + 250k out x $1.20, per 1M: 0.18 + 0.012 + 0.30
    assert cost.usd == pytest.approx(0.492)
    assert cost.per_1m_output == pytest.approx(0.492 / 0.25)  # $1.968 per 1M output tokens
    assert cost.per_task == pytest.approx(0.492 / 1000)  # $0.000492 per request


def test_without_a_cache_read_rate_cached_tokens_pay_the_input_rate() -> None:
    cost = step_cost(step_of(0, STEP), Pricing(usd_per_1m_input=0.30, usd_per_1m_output=1.20)).tokens
    assert cost is not None
    assert cost.usd == pytest.approx(0.30 + 0.30)  # 1M in x $0.30 + 250k out x $1.20


def test_gpu_hours_at_a_throughput() -> None:
    cost = step_cost(step_of(0, STEP), GPU).gpu
    assert cost is not None
    # 2 GPUs x $3.60/h = $0.002/s; at 2,500 out tok/s 1M tokens take 400 s: $0.80
    assert cost.per_1m_output == pytest.approx(0.80)
    assert cost.usd == pytest.approx(0.20)  # the 100 s window
    assert cost.per_task == pytest.approx(0.0002)  # 1,000 requests in it
    assert step_cost(step_of(0, STEP), GPU).tokens is None
    assert step_cost(step_of(0, STEP), DEEPSEEK).gpu is None


def test_a_session_is_the_task_of_a_multi_turn_profile() -> None:
    header = header_with(profile_content=profile_content(SESSION_TOML))
    turns = task_turns(header)
    assert turns == pytest.approx(4.0)
    both = dataclasses.replace(DEEPSEEK, gpu_usd_per_hour=3.60, gpus=2)
    cost = step_cost(step_of(0, STEP), both, turns_per_task=turns)
    assert cost.gpu is not None and cost.tokens is not None
    assert cost.gpu.per_task == pytest.approx(0.20 / 250)  # 1,000 turns = 250 sessions: $0.0008 each
    assert cost.tokens.per_task == pytest.approx(0.492 / 250)
    assert task_turns(header_with()) is None  # single-turn: a task is a request


def test_no_throughput_or_no_request_is_no_figure() -> None:
    idle = step_of(0, Fig(level=1, ok=0, out_tok_s=0.0, output_tokens=0, input_tokens=0))
    gpu = step_cost(idle, GPU).gpu
    tokens = step_cost(idle, DEEPSEEK).tokens
    assert gpu is not None and gpu.per_1m_output is None and gpu.per_task is None
    assert tokens is not None and tokens.per_1m_output is None and tokens.per_task is None


def test_pricing_from_the_header_then_the_profile() -> None:
    assert pricing_of(header_with(pricing=DEEPSEEK.to_dict())) == DEEPSEEK
    content = profile_content()
    content["pricing"] = GPU.to_dict()
    older = header_with(profile_content=content)
    del older["pricing"]  # a record written before the header had the key
    assert pricing_of(older) == GPU
    assert pricing_of(header_with(profile_content=content)) is None  # the header's says: none given
    assert pricing_of(header_with()) is None
    assert pricing_of(header_with(pricing={"gpus": 1})) is None  # no price at all


def test_describe_pricing() -> None:
    assert describe_pricing(DEEPSEEK) == "$0.30 / $1.20 / $0.03 per 1M input / output / cache-read tokens"
    assert describe_pricing(GPU) == "GPU $3.60/h × 2"


def test_fmt_usd() -> None:
    assert fmt_usd(None) == "n/a"
    assert fmt_usd(0.0) == "$0"
    assert fmt_usd(0.000492) == "$0.000492"
    assert fmt_usd(0.492) == "$0.492"
    assert fmt_usd(0.30) == "$0.30" and fmt_usd(0.03) == "$0.03" and fmt_usd(0.0002) == "$0.0002"
    assert fmt_usd(0.8) == "$0.80" and fmt_usd(1.0) == "$1.00"
    assert fmt_usd(1.968) == "$1.97"
    assert fmt_usd(12.346) == "$12.35"
    assert fmt_usd(1234.5) == "$1,234"


# ---- flags and the record header --------------------------------------------------------------------------


def config_of(tmp_path: Path, *argv: str, pricing: str = "") -> RunConfig:
    path = tmp_path / "p.toml"
    path.write_text(f'name = "p"\n[[bucket]]\ninput = 16\noutput = 16\n{pricing}')
    return build_config(build_parser().parse_args(["run", URL, "--profile", str(path), *argv]), URL)


def test_price_flags_reach_the_config_and_the_header(tmp_path: Path) -> None:
    flags = ("--usd-per-1m-input", "0.30", "--usd-per-1m-output", "1.20", "--usd-per-1m-cache-read", "0.03")
    config = config_of(tmp_path, *flags)
    assert config.pricing == DEEPSEEK
    header = record_header(config, RunStatus(), Load.of(config), SLO(), None, {})
    assert header["pricing"] == DEEPSEEK.to_dict()
    assert (
        record_header(config_of(tmp_path), RunStatus(), Load.of(config), SLO(), None, {})["pricing"] is None
    )


def test_flags_override_the_profiles_pricing_one_field_at_a_time(tmp_path: Path) -> None:
    table = "[pricing]\ngpu_usd_per_hour = 3.5\nusd_per_1m_output = 0.6\n"
    assert config_of(tmp_path, pricing=table).pricing == Pricing(usd_per_1m_output=0.6, gpu_usd_per_hour=3.5)
    config = config_of(tmp_path, "--gpus", "8", "--gpu-usd-per-hour", "2.0", pricing=table)
    assert config.pricing == Pricing(usd_per_1m_output=0.6, gpu_usd_per_hour=2.0, gpus=8)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--gpus", "2"), "--gpus needs a GPU price"),
        (("--gpu-usd-per-hour", "-1"), "--gpu-usd-per-hour must be >= 0"),
        (("--usd-per-1m-output", "-0.5"), "--usd-per-1m-output must be >= 0"),
        (("--gpus", "0", "--gpu-usd-per-hour", "1"), "--gpus must be at least 1"),
    ],
)
def test_bad_price_flags_say_what_to_do(tmp_path: Path, argv: tuple[str, ...], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        config_of(tmp_path, *argv)


# ---- ramp report ---------------------------------------------------------------------------------------


def test_report_shows_cost_columns_when_pricing_is_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "220")
    both = {**DEEPSEEK.to_dict(), "gpu_usd_per_hour": 3.60, "gpus": 2}
    path = write_record(tmp_path / "run.jsonl", [STEP], header_with(pricing=both))
    assert report_main(str(path)) == 0
    out = capsys.readouterr().out
    assert "pricing  $0.30 / $1.20 / $0.03 per 1M input / output / cache-read tokens · GPU $3.60/h × 2" in out
    table = out.splitlines()
    head = next(line for line in table if line.startswith("step"))
    assert "GPU $/1M" in head and "API $/1M" in head and "API $/req" in head
    row = next(line for line in table if line.lstrip().startswith("1"))
    assert "$0.80" in row and "$1.97" in row and "$0.000492" in row and "$0.0002" in row


def test_report_has_no_cost_columns_without_pricing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_record(tmp_path / "run.jsonl", [STEP])
    assert report_main(str(path)) == 0
    out = capsys.readouterr().out
    assert "$/1M" not in out and "pricing" not in out
