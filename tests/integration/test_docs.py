"""The documentation site builds with `mkdocs build --strict` (mkdocs.yml): a broken link, a missing anchor,
a missing screenshot or a page left out of the nav fails it. Skipped where mkdocs is not installed
(`pip install -e '.[docs]'`); the links are checked without it by tests/unit/repo/test_doc_links.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly_with_every_page_and_screenshot(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(ROOT / "mkdocs.yml")]
        + ["-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    built = sorted(p.parent.name if p.parent != site else "index" for p in site.glob("**/index.html"))
    assert built == pages
    shown = (site / "console" / "index.html").read_text(encoding="utf-8")
    assert 'src="../screenshots/console-80x24.png"' in shown
    assert (site / "screenshots" / "console-80x24.png").read_bytes() == (
        ROOT / "screenshots" / "console-80x24.png"
    ).read_bytes()
