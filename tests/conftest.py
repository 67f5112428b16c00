"""Shared by every test file: the tiers' markers and the unit tier's guard (``tiers``), and the fixtures
that many files use.

``python -m pytest -m unit`` runs the unit tier (under a minute); ``-m integration`` and ``-m e2e`` the others.

``sim``: the simulator a test module asks for with ``pytestmark = pytest.mark.sim(PRESET, **overrides)``
(``loadgen.sim.build_config``'s arguments; ``process=True`` runs it in a process of its own, else in a
thread of the test's process), one per module, stopped after the module's last test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tiers import (  # noqa: F401  (pytest finds its hooks by name here)
    pytest_collection_modifyitems,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)

from loadgen.sim import SimHandle, build_config, run_sim_in_thread, spawn_sim_process


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest) -> Iterator[SimHandle]:
    marker = request.node.get_closest_marker("sim")
    assert marker is not None, "a module using the sim fixture says which one: pytest.mark.sim(PRESET, ...)"
    overrides = dict(marker.kwargs)
    process = bool(overrides.pop("process", False))
    config = build_config(*marker.args, **overrides)
    handle = spawn_sim_process(config) if process else run_sim_in_thread(config)
    yield handle
    handle.stop()
