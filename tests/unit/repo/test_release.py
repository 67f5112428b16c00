"""The release recipe (docs/development.md#releasing): the version is written once, in pyproject.toml, and
CHANGELOG.md's newest released heading is that version, with an ``Unreleased`` section above it; CI's step b
checks the built files with ``twine check --strict`` and refuses a ``v*`` tag that is not the version."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]
# PEP 440's public versions as a release uses them: 1.2.3, 1.2.3rc1, 1.2.3.post1
VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?")


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def headings() -> list[str]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)


def test_the_version_is_written_once_and_is_a_release_version() -> None:
    assert VERSION.fullmatch(version()), version()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project.get("dynamic", [])
    # nothing else in the package states it: `ramp --version` reads the installed metadata
    stated = [
        str(path.relative_to(ROOT))
        for folder in ("loadgen", "tui")
        for path in (ROOT / folder).rglob("*.py")
        if re.search(rf"""["']{re.escape(version())}["']""", path.read_text(encoding="utf-8"))
    ]
    assert stated == []


def test_the_changelogs_newest_release_is_the_version() -> None:
    names = headings()
    assert names[0] == "Unreleased", names
    released = names[1:]
    assert released and released[0] == version(), (
        f"CHANGELOG.md's newest release {released[:1]} != {version()}"
    )
    assert all(VERSION.fullmatch(name) for name in released), released
    assert len(set(released)) == len(released)


def test_ci_checks_the_built_files_and_the_tag() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "twine check --strict" in ci and "twine" in ci.split("tools() {")[1].split("\n")[0]
    assert "describe --tags --exact-match --match 'v*'" in ci and '"v$built"' in ci
