"""``ramp report``: a record as text, CSV, JSON, Markdown, a self-contained HTML page, or the curve as PNG/SVG.

The modules, one per face of a report: ``text`` (the step table, also the headless run's), ``tables`` (CSV,
JSON, Markdown), ``html`` (the page), ``plots`` (every figure, matplotlib, imported only to draw),
``command`` (reading the records, choosing the format, writing the output). The numbers they show come
from ``loadgen.analysis`` (``reports``, ``steprows``, ``curves``): the report never sees the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.report.text import error_kinds, format_repeats, format_step_table

__all__ = ["error_kinds", "format_repeats", "format_step_table", "report_main"]


def report_main(paths: str | Sequence[str], fmt: str | None = None, out: str | None = None) -> int:
    """``ramp report``: see ``loadgen.report.command`` (imported here only when a report is made, so that
    the headless face, which shares the step table, starts without the report's readers)."""
    from loadgen.report.command import report_main as main

    return main(paths, fmt, out)
