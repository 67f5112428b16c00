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
