"""The suite's tiers (``tests/conftest.py`` installs the hooks): which tier a test file is in, and the guard
that keeps a unit test from starting a process.

Tiers (markers, given here, never in the files): ``unit`` — no process, no server, milliseconds each; the
whole tier runs in under a minute (``python -m pytest -m unit``); ``integration`` — worker processes, the
simulator, servers on 127.0.0.1, the real ``ramp`` in a subprocess; ``e2e`` — the real console in tmux,
the real vLLM. A file is ``unit`` when it lives in ``tests/unit/`` or is named in ``UNIT_FILES``, ``e2e``
when named in ``E2E_FILES``, else ``integration``. ``python -m pytest -q`` still runs them all.

A unit test may not start a process: while one runs (its fixtures included), ``subprocess.Popen``,
``multiprocessing``'s ``Process.start``, ``os.fork`` and ``os.posix_spawn`` fail loudly (``TierError``).
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "e2e")
HERE = Path(__file__).resolve().parent
# Today's files in tests/ that start no process and no server and run in milliseconds (new ones go in
# tests/unit/ instead of here).
UNIT_FILES = frozenset(
    {
        "test_client_health.py",
        "test_cost.py",
        "test_dataset.py",
        "test_format.py",
        "test_headless.py",
        "test_headless_baseline.py",
        "test_metrics.py",
        "test_profile.py",
        "test_record.py",
        "test_report_formats.py",
        "test_report_verdict.py",
        "test_run_live.py",
        "test_run_protocol.py",
        "test_runargs.py",
        "test_slo.py",
        "test_sse.py",
        "test_target_http.py",
        "test_target_tokenize.py",
        "test_telemetry.py",
        "test_telemetry_window.py",
        "test_tui_costs.py",
        "test_tui_errors.py",
        "test_tui_format.py",
        "test_tui_histogram.py",
        "test_workload.py",
    }
)
# The real console in tmux, the real vLLM.
E2E_FILES = frozenset(
    {
        "test_e2e_console_signals.py",
        "test_e2e_console_truth.py",
        "test_e2e_tmux.py",
        "test_vllm_real.py",
    }
)


class TierError(AssertionError):
    """A unit-tier test tried to start a process."""


def tier_of(path: Path) -> str:
    """The tier of the test file at ``path``."""
    if HERE / "unit" in path.resolve().parents or path.name in UNIT_FILES:
        return "unit"
    return "e2e" if path.name in E2E_FILES else "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(tier_of(item.path))


def _refuse(what: str) -> Callable[..., object]:
    def refused(*args: object, **kwargs: object) -> object:
        raise TierError(f"a unit test may not start a process ({what}): move it to the integration tier")

    return refused


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with guarded(item):
        yield


class guarded:
    """While a unit test's phase runs: every way to start a process raises ``TierError``."""

    TARGETS: tuple[tuple[object, str], ...] = (
        (subprocess.Popen, "__init__"),
        (multiprocessing.process.BaseProcess, "start"),
        (os, "fork"),
        (os, "forkpty"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
    )

    def __init__(self, item: pytest.Item) -> None:
        self.active = item.get_closest_marker("unit") is not None
        self.saved: list[tuple[object, str, object]] = []

    def __enter__(self) -> None:
        if not self.active:
            return
        for owner, name in self.TARGETS:
            if hasattr(owner, name):
                self.saved.append((owner, name, getattr(owner, name)))
                setattr(owner, name, _refuse(f"{getattr(owner, '__name__', owner)}.{name}"))

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()
