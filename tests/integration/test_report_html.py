"""``ramp report --format html``: the page's content, and the page in a real browser (headless Chromium).

The browser test opens the report of a real demo record (see tests/unit/analysis/test_report_formats.py) with
``chromium --headless --dump-dom --screenshot`` and checks that it rendered: no console message (a script
error, a resource that failed to load), the figures' ``<svg>`` in the DOM with their drawing in it, and a
screenshot that is not blank. A control page with a script error proves the console check can fail.
Skipped only when no Chromium is installed (``.ci/run`` installs Debian's ``chromium``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from analysis_fakes import Fig, header_with, write_record

from loadgen.cli.commands import main as cli_main

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "fixtures" / "report" / "demo-h200-10-steps.jsonl"
# a console message from the page (Chromium logs them as "...:INFO:CONSOLE(...)] ..."), an uncaught script
# error, or a network request the page made
PAGE_TROUBLE = re.compile(r"CONSOLE|Uncaught|net::ERR_|Failed to load", re.IGNORECASE)
EXTERNAL = re.compile(
    r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?(?:https?:)?//|@import""", re.IGNORECASE
)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One page for every test here: the demo record and a record with errors and a hostile tag."""
    tmp_path = tmp_path_factory.mktemp("report")
    errors = write_record(
        tmp_path / "errors.jsonl",
        [Fig(level=1), Fig(level=8, errors=5, met=False)],
        header_with(tags={"note": "<script>alert(1)</script>"}),
    )
    lines = errors.read_text(encoding="utf-8").splitlines()
    step = json.loads(lines[2])
    step["latest_errors"] = {"http_status": "HTTP 500: <b>engine dead</b>"}
    errors.write_text("\n".join([*lines[:2], json.dumps(step), *lines[3:]]) + "\n", encoding="utf-8")
    out = tmp_path / "report.html"
    assert cli_main(["report", str(DEMO), str(errors), "--format", "html", "-o", str(out)]) == 0
    return out


def test_page_is_self_contained_and_has_every_part(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert not EXTERNAL.search(text), EXTERNAL.search(text)
    assert "<script" not in text.replace("&lt;script&gt;", "")  # no script, and a record's text is escaped
    assert "note=&lt;script&gt;alert(1)&lt;/script&gt;" in text
    for heading in (
        "Throughput–latency (records overlaid)",
        "Throughput and per-request decode speed by level",
        "TTFT and decode speed by percentile, per step",
        "Errors by kind",
        "Server and GPU, per step",
    ):
        assert heading in text, heading
    curve = text.split("<svg", 2)[1]
    assert "A: demo-h200-10-steps.jsonl" in curve and "B: errors.jsonl" in curve  # both curves, one figure
    assert "knee: 128 streams" in curve and "SLO 1s" in curve
    assert "errors by kind, per step" in text and "http_status 5" in text  # the second record's errors
    assert "http_status: HTTP 500: &lt;b&gt;engine dead&lt;/b&gt;" in text  # what the server said, escaped
    assert '<tr class="best"><td>8*</td><td>128</td>' in text
    assert "<ul><li>step 1: worker event loop lag over 5 ms" in text  # a client-bound reason, nested


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.skip("no chromium installed (.ci/run installs Debian's chromium)")
    return found


def open_in_browser(page: Path, shot: Path, profile: Path) -> tuple[str, str]:
    """The DOM after load and Chromium's log; writes the screenshot."""
    done = subprocess.run(
        [
            _chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", f"--screenshot={shot}",
            "--window-size=1200,2000", "--dump-dom", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def page_trouble(log: str) -> list[str]:
    return [line for line in log.splitlines() if PAGE_TROUBLE.search(line)]


def test_report_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    from matplotlib.image import imread

    dom, log = open_in_browser(page, tmp_path / "shot.png", tmp_path / "profile")
    assert page_trouble(log) == []
    figures = re.findall(r"<svg\b.*?</svg>", dom, re.DOTALL)
    assert len(figures) == 5  # curve, levels; the demo's percentiles and server; the other's errors
    for svg in figures:
        assert len(re.findall(r"<path\b", svg)) > 10 and "<text" in svg  # drawn: lines, markers, labels
    assert "best under SLO: step 8, 128 streams" in dom
    pixels = imread(str(tmp_path / "shot.png"))[..., :3]
    assert pixels.shape[:2] == (2000, 1200)
    inked = (pixels < 0.85).any(axis=-1).mean()
    colored = ((pixels.max(axis=-1) - pixels.min(axis=-1)) > 0.2).mean()  # the plots' blue, red, viridis
    assert inked > 0.03 and colored > 0.001, (inked, colored)


def test_console_check_catches_a_script_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><svg></svg><script>notDefined()</script></body></html>")
    _dom, log = open_in_browser(broken, tmp_path / "broken.png", tmp_path / "profile")
    assert any("notDefined" in line for line in page_trouble(log))
