"""Every package the tests import is declared in pyproject.toml (the dependencies or an extra): a package
installed by hand on a developer's machine hides an undeclared one until a fresh machine runs the suite.

tests/vllm/ is left out: its scripts run in vLLM's own venv (scripts/ci_vllm.sh), not in ramp's.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]
OWN_ENV = ("tests/vllm/",)  # run by another interpreter, with its own packages
# Import names that no distribution of the same name provides (namespace packages), for when they are not
# installed here: the distribution that does
PROVIDED_BY = {"opentelemetry": "opentelemetry-api"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    return {normalized(re.split(r"[\s<>=!~;\[(]", r.strip(), maxsplit=1)[0]) for r in reqs}


def local_names() -> set[str]:
    """The repo's own importable names: top-level folders and the modules under tests/."""
    return {p.name for p in ROOT.iterdir() if p.is_dir()} | {p.stem for p in (ROOT / "tests").rglob("*.py")}


def top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_every_package_the_tests_import_is_declared() -> None:
    known = declared()
    dists = md.packages_distributions()  # import name -> distributions, of what is installed here
    local = local_names()
    undeclared: dict[str, str] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(OWN_ENV):
            continue
        for name in top_level_imports(path):
            if name in sys.stdlib_module_names or name in local or name.startswith("_"):
                continue
            # not installed: the import name stands for the distribution (a test skipped without it)
            if not {normalized(d) for d in dists.get(name, [PROVIDED_BY.get(name, name)])} & known:
                undeclared.setdefault(name, rel)
    assert not undeclared, f"imported by the tests, declared nowhere in pyproject.toml: {undeclared}"
