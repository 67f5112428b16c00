"""The built wheel holds every module and data file of the checkout: a module left out of the wheel breaks
every non-editable install (``pip install .``, pipx, uv tool, a Ray node) at import time, which the
developers' editable checkout never shows.

The wheel is built, as pip builds it for a user, from a copy of the tracked files (so that the build sees
nothing a clean clone lacks and leaves no ``build/`` in the checkout).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Installed name of each top-level source folder (pyproject.toml's package-dir maps profiles/).
INSTALLED_AS = {"loadgen": "loadgen", "tui": "tui", "profiles": "loadgen/builtin_profiles"}
# Data files that must travel with the code (package-data): glob under each source folder.
DATA = {"profiles": "*.toml", "tui": "*.tcss", "loadgen/report": "report_schema.json"}


def tracked() -> list[str]:
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e}): the tracked files are what the wheel must hold")
    return [p for p in done.stdout.split("\0") if p]


def installed_path(source: str) -> str:
    top, _, rest = source.partition("/")
    return f"{INSTALLED_AS[top]}/{rest}"


def expected(files: list[str]) -> set[str]:
    """Every tracked .py under loadgen/, tui/ and profiles/, and every data file, as the wheel names it."""
    out = {installed_path(p) for p in files if p.split("/")[0] in INSTALLED_AS and p.endswith(".py")}
    for folder, pattern in DATA.items():
        hits = [p for p in files if Path(p).parent == Path(folder) and Path(p).match(pattern)]
        assert hits, f"no {pattern} tracked in {folder}/: the test's list is out of date"
        out |= {installed_path(p) for p in hits}
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_wheel_holds_every_module_and_data_file(tmp_path: Path) -> None:
    files = tracked()
    src = tmp_path / "src"
    for name in files:
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is not built
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = dist.glob("llm_ramp-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    want = expected(files)
    missing = sorted(want - names)
    assert not missing, f"{len(missing)} of {len(want)} files are not in {wheel.name}: {missing}"
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
