"""The built wheel holds every module and data file of the checkout, under one top-level package,
``llm_ramp`` (setup.py): a module left out of the wheel breaks every non-editable install (``pip install .``,
pipx, uv tool, a Ray node) at import time, which the developers' editable checkout never shows; a top-level
``loadgen`` or ``tui`` would collide with other projects' (``tui`` is one on PyPI).

The wheel is built, as pip builds it for a user, from a copy of the files git knows or would add (so that the
build sees no ``build/``, ``*.egg-info`` or other ignored output, and leaves none in the checkout), then installed in a fresh venv
outside the repo beside a stand-in for PyPI's ``tui``, where ``ramp`` must still run: ``ramp sim``, a
headless run against it, ``ramp report`` of its record.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Installed path of each top-level source folder (setup.py's wheel layout).
INSTALLED_AS = {
    "loadgen": "llm_ramp/loadgen",
    "tui": "llm_ramp/tui",
    "profiles": "llm_ramp/loadgen/builtin_profiles",
    "llm_ramp": "llm_ramp",
}
# Data files that must travel with the code (package-data): glob under each source folder.
DATA = {"profiles": "*.toml", "tui": "*.tcss", "loadgen/report": "report_schema.json"}


def tracked(*more: str) -> list[str]:
    """The tracked files (``more``: git ls-files' options for others too)."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", *more], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e}): the tracked files are what the wheel must hold")
    return [p for p in done.stdout.split("\0") if p]


def installed_path(source: str) -> str:
    top, _, rest = source.partition("/")
    return f"{INSTALLED_AS[top]}/{rest}"


def expected(files: list[str]) -> set[str]:
    """Every tracked .py under loadgen/, tui/, profiles/ and llm_ramp/, and every data file, as the wheel
    names it."""
    out = {installed_path(p) for p in files if p.split("/")[0] in INSTALLED_AS and p.endswith(".py")}
    for folder, pattern in DATA.items():
        hits = [p for p in files if Path(p).parent == Path(folder) and Path(p).match(pattern)]
        assert hits, f"no {pattern} tracked in {folder}/: the test's list is out of date"
        out |= {installed_path(p) for p in hits}
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The wheel pip builds from a copy of the working tree's files (the tracked ones, and new ones git does
    not ignore: a tracked module may already import one), and the tracked files' names."""
    files = tracked()
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"
    for name in tracked("--cached", "--others", "--exclude-standard"):
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is not built
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    dist = tmp / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = dist.glob("llm_ramp-*.whl")
    return wheel, files


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_wheel_holds_every_module_and_data_file_under_llm_ramp(built: tuple[Path, list[str]]) -> None:
    wheel, files = built
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        sources = {n: zf.read(n).decode("utf-8") for n in names if n.endswith(".py")}
        (top_level,) = [zf.read(n).decode() for n in names if n.endswith(".dist-info/top_level.txt")]
        (entry_points,) = [zf.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt")]
    want = expected(files)
    missing = sorted(want - names)
    assert not missing, f"{len(missing)} of {len(want)} files are not in {wheel.name}: {missing}"
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"llm_ramp"}, sorted(tops)
    assert top_level.split() == ["llm_ramp"]
    assert "ramp = llm_ramp.cli:main" in entry_points
    # no module of the wheel imports a top-level loadgen or tui, and what names a module names it installed
    stray = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            stray += [f"{name}:{node.lineno} {m}" for m in modules if m.split(".")[0] in ("loadgen", "tui")]
    assert not stray, stray
    assert '"-m", "llm_ramp.loadgen.sim"' in sources["llm_ramp/loadgen/sim/handle.py"]
    assert 'files("llm_ramp.loadgen.builtin_profiles")' in sources["llm_ramp/loadgen/profile/load.py"]
    # comments and prose are the checkout's: only code changed
    assert "``python -m loadgen.sim``" in sources["llm_ramp/loadgen/sim/handle.py"]


def stand_in_tui(folder: Path) -> Path:
    """A wheel named ``tui`` with a top-level ``tui`` package, as PyPI's tui 1.1.1 installs one."""
    wheel = folder / "tui-1.1.1-py3-none-any.whl"
    files = {
        "tui/__init__.py": 'WHOSE = "the other tui"\n',
        "tui-1.1.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tui\nVersion: 1.1.1\n",
        "tui-1.1.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files["tui-1.1.1.dist-info/RECORD"] = "".join(f"{n},,\n" for n in [*files, "tui-1.1.1.dist-info/RECORD"])
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return wheel


@pytest.fixture(scope="module")
def venv(built: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the repo with the wheel and the stand-in ``tui``: the wheel's dependencies are
    this interpreter's (a path line, not a site folder: its editable install of the checkout stays out)."""
    wheel, _files = built
    tmp = tmp_path_factory.mktemp("venv")
    env = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "zz_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(deps)))
    for whl in (wheel, stand_in_tui(tmp)):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(python),
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                str(whl),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return env


def run_in(cwd: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=clean,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture()
def ramp_sim(venv: Path, tmp_path: Path) -> Iterator[str]:
    """``ramp sim`` of the installed wheel, at 20 times its speed; its URL."""
    out = tmp_path / "sim.out"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [str(venv / "bin" / "ramp"), "sim", "--preset", "fast", "--speed", "20", "--port", "0"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            first = out.read_text().splitlines()[:1]
            if first and first[0].startswith("READY "):
                yield first[0].split()[1]
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"ramp sim did not start: {out.read_text()[-2000:]}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_installed_wheel_runs_beside_another_tui(venv: Path, ramp_sim: str, tmp_path: Path) -> None:
    python, ramp = str(venv / "bin" / "python"), str(venv / "bin" / "ramp")
    probe = """
import importlib.util, sys
import tui, llm_ramp.tui.app, llm_ramp.loadgen
from llm_ramp.loadgen.profile import builtin_profile_names
from llm_ramp.loadgen.sim import spawn_sim_process
handle = spawn_sim_process()  # python -m llm_ramp.loadgen.sim
print(tui.WHOSE, llm_ramp.tui.app.__file__.startswith(sys.prefix), importlib.util.find_spec("loadgen"))
print(",".join(builtin_profile_names()), handle.url.startswith("http://127.0.0.1:"))
handle.stop()
"""
    done = run_in(tmp_path, python, "-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = done.stdout.splitlines()
    assert first == "the other tui True None"  # ours beside it, and no top-level loadgen at all
    assert "chat" in second.split(" ")[0].split(",") and second.endswith(" True")
    version = run_in(tmp_path, ramp, "--version")
    assert version.returncode == 0 and version.stdout.startswith("ramp "), version.stderr
    out = tmp_path / "wheel-run.jsonl"
    args = ["--steps", "1,2", "--step-seconds", "2", "--warmup", "0.5", "--headless", "--no-metrics"]
    run = run_in(tmp_path, ramp, "run", ramp_sim, *args, "--out", str(out))
    assert run.returncode in (0, 1), run.stderr[-2000:]  # every step met the SLO, or one did not: finished
    report = run_in(tmp_path, ramp, "report", "--format", "json", str(out))
    assert report.returncode == 0, report.stderr[-2000:]
    steps = json.loads(report.stdout)["records"][0]["steps"]
    assert [s["level"] for s in steps] == [1, 2] and all(s["ok"] > 0 for s in steps), steps
