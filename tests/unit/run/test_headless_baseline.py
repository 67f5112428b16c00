"""``ramp run URL --headless --baseline RECORD`` (issue 11, item 8, in the headless face): the conditions
check up front, and at the end each step against the baseline at its level in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_baseline import IDENTITY, live_config, matched, write_baseline
from tui_fakes import STEPS

from loadgen.cli.headless import baseline_warning, finish
from loadgen.record import RecordWriter
from loadgen.run.config import RunOutcome
from loadgen.run.recording import planned_header


def _written(tmp_path: Path, config_out: str, header: dict[str, object]) -> None:
    """The live run's own record header, as the engine would have written it (the server identity known)."""
    with RecordWriter(Path(config_out)) as writer:
        writer.write_header({**header, **IDENTITY})


def test_finish_says_each_step_against_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, path = matched(tmp_path)
    assert config.out is not None
    _written(tmp_path, config.out, planned_header(config))
    outcome = RunOutcome(state="finished", steps=STEPS, best_step=2, record_path=config.out)
    finish(outcome, config)
    out = capsys.readouterr().out
    assert f"vs baseline {path}" in out
    lines = {line.split(":")[0].strip(): line for line in out.splitlines() if line.startswith("  step ")}
    # live 8 streams 1,480 tok/s vs the baseline's 1,300 (one step each side: no noise estimate, "?")
    assert "better?" in lines["step 1 (8 streams)"] and "+14%" in lines["step 1 (8 streams)"]
    # live 16 streams 2,710 vs the baseline's 3,000–3,100 over three repeats: worse, the range says so
    assert "worse" in lines["step 2 (16 streams)"]
    # live 32 streams 4,390 inside the baseline's 4,300–4,500: within noise
    assert "noise" in lines["step 3 (32 streams)"]
    assert "no verdict (baseline has no clean step at 64 streams)" in lines["step 4 (64 streams)"]
    assert "⚠" not in out  # same conditions


def test_a_mismatch_is_warned_before_the_run_and_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, path = matched(tmp_path, runtime="sglang")
    warning = baseline_warning(str(path), {**planned_header(config), **IDENTITY})
    assert warning is not None and "runtime" in warning and "sglang" in warning and "vllm" in warning
    assert config.out is not None
    _written(tmp_path, config.out, planned_header(config))
    finish(RunOutcome(state="finished", steps=STEPS, best_step=2, record_path=config.out), config)
    assert "⚠" in capsys.readouterr().out


def test_an_unreadable_baseline_is_said_not_raised(tmp_path: Path) -> None:
    config = live_config(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    warning = baseline_warning(str(bad), planned_header(config))
    assert warning is not None and warning.startswith("baseline not used:")
    assert write_baseline  # the same writer as the console's baseline tests
