"""The suite's tiers (``tests/conftest.py`` installs the hooks): which tier a test file is in, the guard
that keeps a unit test from starting a process, and ``-m`` over tiers alone skipping the other tiers' files.

Tiers (markers, given here, never in the files): ``unit`` — no process, no server, milliseconds each; the
whole tier, the house rules included, runs in under 20 s (``python -m pytest -m unit``); ``integration`` —
worker processes, the simulator, servers on 127.0.0.1, the real ``ramp`` in a subprocess; ``e2e`` — the real
console in tmux, the real vLLM. The folder says the tier: ``tests/unit/`` and ``tests/house/`` (the house
rules) are ``unit``, ``tests/integration/`` ``integration``, ``tests/e2e/`` ``e2e``; a test file anywhere else
(directly in ``tests/``) has no tier and fails collection with a line that says where it goes.
``python -m pytest -q`` runs them all.

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


class TierError(AssertionError):
    """A unit-tier test tried to start a process."""


def folder_tier(path: Path) -> str | None:
    """The tier a folder of tests/ says, for `path` inside it (or the folder itself), else None."""
    resolved = path.resolve()
    parts = resolved.relative_to(HERE).parts if HERE in resolved.parents else ()
    return TIER_DIRS.get(parts[0]) if parts else None


def tier_of(path: Path) -> str:
    """The tier of the test file at ``path``: its folder's (``TierError`` for a file outside the tier folders)."""
    by_folder = folder_tier(path)
    if by_folder is None:
        raise TierError(
            f"{path}: a test file lives in the folder of its tier: tests/unit/<package>/, tests/integration/ or "
            "tests/e2e/ (tests/tiers.py)"
        )
    return by_folder


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
    return True if tier is not None and tier not in kept else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets its folder's tier marker; a test file outside the tier folders stops the run, saying so."""
    for item in items:
        try:
            tier = tier_of(item.path)
        except TierError as error:
            raise pytest.UsageError(str(error)) from None
        item.add_marker(tier)


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
