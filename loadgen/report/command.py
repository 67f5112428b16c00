"""``ramp report RECORD... [--format text|csv|json|md|html|png|svg] [-o FILE]``: the command.

Reads every record (a missing file, a line that is not JSON, a damaged step: one line naming the file and
the line, exit 2), renders the chosen format and writes it to ``-o FILE`` or stdout. Without ``--format``
the format follows ``-o``'s extension (``report.html`` -> html), else text. The plotted formats (html, png,
svg) need matplotlib, the ``report`` extra: without it, one line saying how to install it, exit 2. A PNG is
never written to a terminal.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence

from loadgen.analysis.compare import run_label
from loadgen.analysis.reports import ReportRun, load_report_run
from loadgen.analysis.runs import AnalysisError

__all__ = ["EXIT_OK", "EXIT_USAGE", "FORMATS", "ReportError", "format_for", "render", "report_main"]

EXIT_OK, EXIT_USAGE = 0, 2
FORMATS = ("text", "csv", "json", "md", "html", "png", "svg")
PLOTTED = frozenset({"html", "png", "svg"})
_EXTENSIONS = {".txt": "text", ".csv": "csv", ".json": "json", ".md": "md", ".html": "html", ".htm": "html",
               ".png": "png", ".svg": "svg"}  # fmt: skip
INSTALL_HINT = "pip install 'llm-ramp[report]'"


class ReportError(Exception):
    """A report that cannot be made; ``str`` is one line saying why and what to do."""


def format_for(fmt: str | None, out: str | None) -> str:
    """The format asked for, else the one ``out``'s extension names, else text."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ReportError(f"--format {fmt}: not a format; one of {', '.join(FORMATS)}")
        return fmt
    if out is not None:
        return _EXTENSIONS.get(os.path.splitext(out)[1].lower(), "text")
    return "text"


def require_matplotlib(fmt: str) -> None:
    try:
        import matplotlib  # noqa: F401  (only whether it is there)
    except ImportError:
        raise ReportError(
            f"--format {fmt} draws with matplotlib, which is not installed: {INSTALL_HINT}"
        ) from None


def _text(reports: Sequence[ReportRun]) -> str:
    from loadgen.report.text import text_report

    width = shutil.get_terminal_size((120, 24)).columns
    if len(reports) == 1:
        return text_report(reports[0], width) + "\n"
    parts = [f"== {r.run.label}: {r.run.path}\n{text_report(r, width)}\n" for r in reports]
    return "\n".join(parts)


def _renderer(fmt: str) -> Callable[[Sequence[ReportRun]], str | bytes]:
    from loadgen.report import tables

    if fmt == "csv":
        return tables.csv_report
    if fmt == "json":
        return tables.json_report
    if fmt == "md":
        return tables.markdown_report
    if fmt == "html":
        from loadgen.report.html import html_report

        return html_report
    if fmt in ("png", "svg"):
        from loadgen.report.plots import curve_image

        return lambda reports: curve_image(reports, fmt)
    return _text


def render(reports: Sequence[ReportRun], fmt: str) -> str | bytes:
    """The report of ``reports`` in ``fmt`` (PNG as bytes, every other format as text)."""
    if fmt in PLOTTED:
        require_matplotlib(fmt)
    if fmt in ("png", "svg") and not any(r.run.steps for r in reports):
        raise ReportError(f"no finished step in any record: no curve to draw as {fmt}")
    return _renderer(fmt)(reports)


def _write(content: str | bytes, out: str | None, fmt: str) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else content
    if out is None or out == "-":
        if isinstance(content, str):
            sys.stdout.write(content)
            return
        if sys.stdout.isatty():
            raise ReportError(f"--format {fmt} is binary: give -o FILE (or pipe it)")
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        with open(out, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise ReportError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"ramp report: wrote {out} ({fmt}, {len(data):,} bytes)", file=sys.stderr)


def report_main(paths: str | Sequence[str], fmt: str | None = None, out: str | None = None) -> int:
    """``ramp report``: 0 when written, 2 for bad input (one line naming the file and line) or output."""
    files = [paths] if isinstance(paths, str) else list(paths)
    try:
        chosen = format_for(fmt, out)
        if chosen in PLOTTED:
            require_matplotlib(chosen)
        reports = [load_report_run(path, run_label(n)) for n, path in enumerate(files)]
        _write(render(reports, chosen), out, chosen)
    except (AnalysisError, ReportError) as exc:
        print(f"ramp report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
