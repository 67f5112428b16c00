"""Glyphs that fused or tore (issue 21, item 5): a server-panel label as long as its column ran into its
value ("step 22 serverTTFT"); a zero in a TERM=linux sparkline was half a bar (a full one in that font);
"✕ no successful reque" was cut in the SLO cell."""

from __future__ import annotations

from rich.style import Style

from loadgen.snapshot import SLOVerdict
from tui.format import verdict_cell
from tui.plot import sparkline
from tui.server import LABEL_W, ServerRows


def test_a_label_as_long_as_its_column_keeps_a_gap() -> None:
    rows = ServerRows(80, {"dim": Style(), "strong": Style()})
    label = "step 22 server"
    assert len(label) == LABEL_W
    rows.row(label, ("TTFT p95 ", ""), ("610 ms", ""))
    assert "step 22 server TTFT p95 610 ms" in rows.lines[-1].plain


def test_a_zero_in_a_basic_sparkline_is_a_baseline_not_a_bar() -> None:
    assert sparkline([0.0, 0.0, 0.0], basic=True) == "___"
    assert sparkline([0.0, 5.0, 10.0], basic=True) == "_▄█"
    assert sparkline([0.0, 10.0]) == "▁█"  # eighth blocks: ▁ is already a baseline


def test_long_slo_clauses_are_short_in_a_compact_cell() -> None:
    none_ok = SLOVerdict(False, ("no successful request (12 errors)",))
    assert verdict_cell(none_ok, 0) == "miss no successful request"
    assert verdict_cell(none_ok, 2) == "✕ no success"
