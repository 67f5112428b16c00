"""Where records go without ``--out`` (``RAMP_RUNS_DIR``, else ``runs/`` here, else the XDG state folder),
the usage error when that folder cannot be written, and the face chosen without a terminal."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from loadgen.cli.flags import RunFlags
from loadgen.cli.headless import console_refused
from loadgen.cli.resolve import resolve, runs_folder
from loadgen.exits import UsageError


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAMP_RUNS_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


def test_runs_here_by_default(here: Path) -> None:
    out = resolve(RunFlags(), "http://127.0.0.1:9").out
    assert os.path.dirname(out) == "runs" and out.endswith("-chat.jsonl")


def test_ramp_runs_dir_wins(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAMP_RUNS_DIR", str(here / "records"))
    assert os.path.dirname(resolve(RunFlags(), "http://127.0.0.1:9").out) == str(here / "records")
    assert resolve(RunFlags(out="x.jsonl"), "http://127.0.0.1:9").out == "x.jsonl"


def test_the_xdg_state_folder_when_runs_here_cannot_be_a_folder(here: Path) -> None:
    (here / "runs").write_text("a file where the folder would be")
    assert runs_folder() == str(here / "state" / "llm-ramp" / "runs")


def test_an_unwritable_folder_is_one_usage_error_naming_both_ways_out(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (here / "afile").write_text("")
    monkeypatch.setenv("RAMP_RUNS_DIR", str(here / "afile" / "runs"))
    with pytest.raises(UsageError) as caught:
        resolve(RunFlags(), "http://127.0.0.1:9")
    said = str(caught.value)
    assert "--out" in said and "RAMP_RUNS_DIR" in said and "afile" in said and "\n" not in said


def test_no_terminal_means_headless_unless_a_web_driver_draws_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert console_refused() == "stdin and stdout are not a terminal"
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert console_refused() is None
