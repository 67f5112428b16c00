"""Issue 19, defect 10 — the smaller ones that need no process: ``--steps 4,,8`` is a usage error naming the
flag; a ``--dataset`` run is not warned of the buckets' context overflow (its own lengths are sent); a step
whose goodput tok/s reads above its out tok/s says why."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from analysis_fakes import summary_of

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.config import SLO
from loadgen.profile import load_profile
from loadgen.record import step_from_line, step_line
from loadgen.report import format_step_table
from loadgen.run.setup import context_warning
from loadgen.slo import evaluate
from loadgen.snapshot import WindowStats

URL = "http://127.0.0.1:8000"


@pytest.mark.parametrize("given", ["4,,8", "4,8,", ",4"])
def test_a_level_left_out_of_steps_is_a_usage_error(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["run", URL, "--steps", given])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--steps" in err and "a level is missing between commas" in err, err


def test_a_dataset_run_is_not_warned_of_the_buckets_context(tmp_path: Path) -> None:
    # The chat profile's buckets can ask more than 1,024 tokens: a synthetic run is warned, rightly.
    assert context_warning(load_profile("chat"), 1024, fit=False) is not None
    data = tmp_path / "prompts.txt"
    data.write_text("a short prompt\nanother one\n")
    argv = ["run", URL, "--profile", "chat", "--dataset", str(data), "--out", str(tmp_path / "r.jsonl")]
    config = build_config(build_parser().parse_args(argv), URL)
    assert config.profile.replay is not None and config.profile.buckets  # the buckets are still there
    assert context_warning(config.profile, 1024, fit=False) is None


def test_goodput_above_out_tok_s_is_explained() -> None:
    stats = WindowStats(window="step", duration_s=10.0, ok=40, out_tok_s=1000.0, goodput_tok_s=1180.0)
    step = summary_of(stats, evaluate(SLO(), stats), 2, level=8)
    back = step_from_line(step_line(step, {}))  # the record's numbers, read back
    assert (back.stats.goodput_tok_s, back.stats.out_tok_s) == (1180.0, 1000.0)
    table = format_step_table([back], None)
    assert "step 3: goodput 1,180 tok/s reads above out 1,000 tok/s" in table, table
    assert "requests sent in the window (some arrived after it)" in table, table
    even = dataclasses.replace(back, stats=dataclasses.replace(stats, goodput_tok_s=990.0))
    assert "reads above out" not in format_step_table([even], None)
