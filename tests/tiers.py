"""The suite's tiers (``tests/conftest.py`` installs the hooks): which tier a test file is in, the guard
that keeps a unit test from starting a process, and ``-m`` over tiers alone skipping the other tiers' files.

Tiers (markers, given here, never in the files): ``unit`` — no process, no server, milliseconds each; the
whole tier, the house rules included, runs in under 20 s (``python -m pytest -m unit``); ``integration`` —
worker processes, the simulator, servers on 127.0.0.1, the real ``ramp`` in a subprocess; ``e2e`` — the real
console in tmux, the real vLLM. The folder says the tier: ``tests/unit/`` and ``tests/house/`` (the house
rules) are ``unit``, ``tests/integration/`` ``integration``, ``tests/e2e/`` ``e2e``. A test file still directly
in ``tests/`` is ``unit`` when named in ``UNIT_FILES``, ``e2e`` when named in ``E2E_FILES``, else
``integration`` (``scripts/tier_tests.py`` moves them into the folders). ``python -m pytest -q`` runs them all.

``-m`` naming tiers only (``unit``, ``not e2e``, ``unit or integration``): the files of the tiers it leaves out
are not even imported (``pytest_ignore_collect``), so ``-m unit`` pays for collecting the unit tier alone.
Any other expression collects every file and deselects as pytest does.

A unit test may not start a process: while one runs (its fixtures included), ``subprocess.Popen``,
``multiprocessing``'s ``Process.start``, ``os.fork`` and ``os.posix_spawn`` fail loudly (``TierError``).
"""

from __future__ import annotations

import ast
import multiprocessing.process
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "e2e")
HERE = Path(__file__).resolve().parent
# The folders that say their tier.
TIER_DIRS = {"unit": "unit", "house": "unit", "integration": "integration", "e2e": "e2e"}
# Today's files directly in tests/ that start no process and no server and run in milliseconds (new ones go
# in tests/unit/<package>/ instead of here; scripts/tier_tests.py moves these there).
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


def folder_tier(path: Path) -> str | None:
    """The tier a folder of tests/ says, for `path` inside it (or the folder itself), else None."""
    resolved = path.resolve()
    parts = resolved.relative_to(HERE).parts if HERE in resolved.parents else ()
    return TIER_DIRS.get(parts[0]) if parts else None


def tier_of(path: Path) -> str:
    """The tier of the test file at ``path``."""
    by_folder = folder_tier(path)
    if by_folder is not None:
        return by_folder
    if path.name in UNIT_FILES:
        return "unit"
    return "e2e" if path.name in E2E_FILES else "integration"


def selected_tiers(expression: str) -> frozenset[str] | None:
    """The tiers a ``-m`` expression keeps when it names tiers only (``unit``, ``not e2e``), else None: a test
    carries exactly one tier marker, so such an expression decides by the tier alone."""
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if not names or not names <= set(TIERS):
        return None
    holds = {tier: _holds(tree, tier) for tier in TIERS}
    if any(value is None for value in holds.values()):
        return None
    return frozenset(tier for tier, value in holds.items() if value)


def _holds(node: ast.expr, tier: str) -> bool | None:
    """``node`` (and, or, not, tier names) for a test of ``tier``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id == tier
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _holds(node.operand, tier)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_holds(v, tier) for v in node.values]
        if None in values:
            return None
        return all(values) if isinstance(node.op, ast.And) else any(values)
    return None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m`` over tiers only, a tier folder or a flat test file of a tier left out is not collected."""
    kept = selected_tiers(str(config.getoption("markexpr", "") or ""))
    if kept is None:
        return None
    tier = folder_tier(collection_path)
    if tier is None and collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        tier = tier_of(collection_path)
    return True if tier is not None and tier not in kept else None


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
