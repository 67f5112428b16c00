"""The tiers: where a test file belongs, and a unit test that tries to start a process fails loudly."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import HERE, TierError, tier_of


def test_files_get_their_tier_by_folder_and_by_name() -> None:
    assert tier_of(HERE / "unit" / "test_wheel.py") == "unit"
    assert tier_of(HERE / "test_format.py") == "unit"
    assert tier_of(HERE / "test_e2e_tmux.py") == "e2e"
    assert tier_of(HERE / "test_engine.py") == "integration"
    assert tier_of(Path("elsewhere") / "test_new.py") == "integration"


def test_this_file_is_marked_unit(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("integration") is None


def test_a_unit_test_cannot_start_a_subprocess() -> None:
    with pytest.raises(TierError, match="may not start a process"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)


def test_a_unit_test_cannot_start_a_worker_process() -> None:
    with pytest.raises(TierError):
        multiprocessing.get_context("spawn").Process(target=print).start()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_a_unit_test_cannot_fork() -> None:
    with pytest.raises(TierError):
        os.fork()
