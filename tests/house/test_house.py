"""The house rules as seven tests, one per rule of ../shared/ARCHITECTURE.md ("Rules that keep the house standing",
and the rules steps 3 and 4 added), in the unit tier. Each test lists every violation in the house, each as
`file:line: [rule] what`, not only the first; `python tests/house/house_rules.py [paths]` prints the same for
a few files. The checkers are in house_rules.py, their exemptions (each with its reason) beside them.

1. layers: the import-linter contracts of pyproject.toml hold (layers, no cycles, no UI in loadgen, and what
   the steps added), checked in this process, and every loadgen module sits in a layer.
2. sizes: module 500 lines, class 300, function 60.
3. private names stay in their module, tests included.
4. no erased types: no reflection on the project's objects, no `type: ignore[attr-defined]` (nor a bare one).
5. a runtime's name is its adapter's: "vllm"/"sglang" in product code only in runtimes/ and sim/.
6. one owner: the run's state is written only by run/state.py.
7. a metric's name is the catalogue's: written out as a string only in loadgen/measures.py, loadgen/sim/ and
   tests (issue 29's catalogue).
"""

from __future__ import annotations

import sys

import pytest
from house_rules import ROOT, every_violation, listed
from importlinter import configuration
from importlinter.application import use_cases

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _unplaced_modules() -> list[str]:
    """Modules of loadgen outside every layer: a new module must be placed, or no layer rule checks it."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["id"] == "layers"]
    placed = {name.strip().strip("()") for layer in layers for name in layer.replace("\\", " ").split(":")}
    modules = {
        f"loadgen.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "loadgen").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    modules.discard("loadgen.builtin_profiles")
    return sorted(modules - placed)


def test_layers(capsys: pytest.CaptureFixture[str]) -> None:
    configuration.configure()
    kept = use_cases.lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    unplaced = _unplaced_modules()
    broken = "" if kept else report
    assert kept and not unplaced, broken + (
        f"not in any layer of pyproject.toml: {unplaced}" if unplaced else ""
    )


def test_sizes() -> None:
    found = every_violation("size")
    assert not found, listed(found)


def test_private_names_stay_in_their_module() -> None:
    found = every_violation("private")
    assert not found, listed(found)


def test_no_erased_types() -> None:
    found = every_violation("reflection", "ignore")
    assert not found, listed(found)


def test_runtime_names_stay_in_their_adapters() -> None:
    found = every_violation("runtime")
    assert not found, listed(found)


def test_one_owner() -> None:
    found = every_violation("state")
    assert not found, listed(found)


def test_a_metric_name_is_written_out_only_in_the_catalogue() -> None:
    found = every_violation("metric")
    assert not found, listed(found)
