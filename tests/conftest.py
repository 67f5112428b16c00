"""Shared by every test file: the tiers' markers and the unit tier's guard (``tiers``), and the fixtures
that many files use.

``python -m pytest -m unit`` runs the unit tier (under 20 s, the house rules included; it collects the unit
folders alone); ``-m integration`` and ``-m e2e`` the others.

``sim``: the simulator a test module asks for with ``pytestmark = pytest.mark.sim(PRESET, **overrides)``
(``loadgen.sim.build_config``'s arguments; ``process=True`` runs it in a process of its own, else in a
thread of the test's process), one per module, stopped after the module's last test.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from tiers import (  # noqa: F401  (pytest finds its hooks by name here)
    pytest_collection_modifyitems,
    pytest_ignore_collect,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

# The suite starts hundreds of Python processes (workers, simulators, the real `ramp`): where the environment
# says PYTHONDONTWRITEBYTECODE, each compiled every module of the project again (0.3-0.4 s of CPU apiece on 2
# cores) and pytest rewrote every test module's asserts afresh. The suite's own process writes the bytecode
# caches (in __pycache__, ignored by git) so that the processes it starts read them.
sys.dont_write_bytecode = False

if TYPE_CHECKING:  # imported by the fixture: a run of the unit tier never pays for the simulator's imports
    from loadgen.sim import SimHandle


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every imported module, the test items) lives for the whole session: moved out
    of the collector's sight, so that each later full collection does not walk it again (the unit tier: 2 s
    of its ~19)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest) -> Iterator[SimHandle]:
    from loadgen.sim import build_config, run_sim_in_thread, spawn_sim_process

    marker = request.node.get_closest_marker("sim")
    assert marker is not None, "a module using the sim fixture says which one: pytest.mark.sim(PRESET, ...)"
    overrides = dict(marker.kwargs)
    process = bool(overrides.pop("process", False))
    config = build_config(*marker.args, **overrides)
    handle = spawn_sim_process(config) if process else run_sim_in_thread(config)
    yield handle
    handle.stop()
