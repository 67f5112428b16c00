"""The import-linter contracts of pyproject.toml (layers, no cycles, no UI in loadgen) hold: one test each.

`.ci/run` runs `lint-imports` as well; this keeps the contracts inside `pytest` for anyone running only that.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = [
    c["id"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
]


def _lint_imports() -> str:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
        "lint-imports"
    )
    assert found, "lint-imports is missing: pip install -e '.[test]'"
    return found


@pytest.mark.parametrize("contract", CONTRACTS)
def test_import_contract_is_kept(contract: str) -> None:
    cmd = [_lint_imports(), "--no-logo", "--no-cache", "--contract", contract]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_loadgen_module_sits_in_a_layer() -> None:
    """A module outside every layer is checked by no layer rule: a new module must be placed."""
    (layers,) = [
        c["layers"]
        for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
        if c["id"] == "layers"
    ]
    placed = {name.strip().strip("()") for layer in layers for name in layer.replace("\\", " ").split(":")}
    modules = {
        f"loadgen.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "loadgen").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    modules.discard("loadgen.builtin_profiles")
    assert modules <= placed, f"not in any layer of pyproject.toml: {sorted(modules - placed)}"
