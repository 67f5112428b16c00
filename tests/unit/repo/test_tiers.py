"""The tiers: where a test file belongs, and a unit test that tries to start a process fails loudly."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import HERE, TierError, pytest_ignore_collect, selected_tiers, tier_of


def test_files_get_their_tier_by_folder_alone() -> None:
    assert tier_of(HERE / "unit" / "test_wheel.py") == "unit"
    for outside in (HERE / "test_format.py", HERE / "test_e2e_tmux.py", Path("elsewhere") / "test_new.py"):
        with pytest.raises(TierError, match="lives in the folder of its tier"):
            tier_of(outside)
    assert tier_of(HERE / "unit" / "run" / "test_wheel.py") == "unit"
    assert tier_of(HERE / "house" / "test_house.py") == "unit"
    assert tier_of(HERE / "integration" / "test_format.py") == "integration"  # the folder wins over the name
    assert tier_of(HERE / "e2e" / "test_engine.py") == "e2e"


def test_a_mark_expression_over_tiers_alone_decides_by_the_tier() -> None:
    assert selected_tiers("unit") == {"unit"}
    assert selected_tiers(" not e2e ") == {"unit", "integration"}
    assert selected_tiers("(unit or e2e) and not integration") == {"unit", "e2e"}
    assert selected_tiers("unit and e2e") == frozenset()
    # Another marker, or no expression: every file is collected, pytest deselects.
    for other in ("unit and not slow", "sim", "", "unit(", "unit == 1"):
        assert selected_tiers(other) is None


class _Options:
    def __init__(self, markexpr: str) -> None:
        self.markexpr = markexpr

    def getoption(self, name: str, default: object = None) -> object:
        return self.markexpr if name == "markexpr" else default


def test_minus_m_unit_does_not_collect_the_other_tiers_files() -> None:
    unit, everything = _Options("unit"), _Options("")
    for left_out in (HERE / "integration", HERE / "e2e", HERE / "integration" / "test_engine.py"):
        assert pytest_ignore_collect(left_out, unit) is True
        assert pytest_ignore_collect(left_out, everything) is None
    for kept in (
        HERE / "unit",
        HERE / "house",
        HERE / "unit" / "loadgen" / "test_format.py",
        HERE / "test_stray.py",  # collected, then refused by its missing tier (pytest_collection_modifyitems)
        HERE / "tui_fakes.py",
        HERE / "fixtures",
    ):
        assert pytest_ignore_collect(kept, unit) is None


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
