"""A live step against a baseline in words (``ramp URL --baseline RECORD``): the steps table's cell, the
step detail's lines. Plain text, shared by the console (``tui.baseline``) and the headless face; the
verdicts themselves are ``loadgen.analysis.baseline``'s.
"""

from __future__ import annotations

from loadgen.analysis.baseline import StepVerdict, Verdict
from loadgen.format import fmt_count, fmt_pct, fmt_range, fmt_signed

__all__ = ["GLYPHS", "NO_NOISE", "NO_VERDICT", "WORDS", "verdict_cell", "verdict_lines"]

WORDS = {"better": "better", "worse": "worse", "within noise": "noise", "same": "same"}
GLYPHS = {"better": "▲", "worse": "▼", "within noise": "≈", "same": "="}  # the narrowest table's words
NO_NOISE = "?"  # after a word: one step on each side, no noise estimate
NO_VERDICT = "–"


def _word(verdict: Verdict, glyph: bool = False) -> str:
    word = (GLYPHS if glyph else WORDS).get(verdict.word, verdict.word)
    return word if verdict.noise_known or verdict.word == "same" else word + NO_NOISE


def _pct(verdict: Verdict) -> str:
    pct = verdict.delta.pct
    return "" if pct is None else fmt_signed(pct / 100.0, lambda v: fmt_pct(v, 0)) + " "


def verdict_cell(found: StepVerdict | None, compact: int = 0) -> str:
    """The steps table's cell: '+12% better · -8% noise' (out tok/s, then the SLO's figure); ``compact`` 1
    drops the percentages, 2 writes the words as ▲ ▼ ≈ =. '?' after a word: one step on each side, no noise
    estimate."""
    if found is None or not found.verdicts:
        return NO_VERDICT
    return " · ".join((_pct(v) if compact == 0 else "") + _word(v, compact >= 2) for v in found.verdicts)


def _spread_text(verdict: Verdict, side: str) -> str:
    spread = verdict.baseline if side == "baseline" else verdict.live
    look = verdict.figure.look
    if spread.n == 1:
        return look(spread.median)
    shown = fmt_range(spread.median, spread.low, spread.high, look)
    return f"{shown} over {fmt_count(spread.n)} steps"


def verdict_lines(found: StepVerdict | None, path: str) -> list[str]:
    """The step detail view's lines: each figure, this run against the baseline, the delta and the mark."""
    if found is None:
        return []
    head = f"vs baseline {path} at {found.key.label}"
    if not found.verdicts:
        return [f"{head}: no verdict ({found.reason})"]
    lines = [head + ":"]
    for verdict in found.verdicts:
        delta = fmt_signed(verdict.delta.delta, verdict.figure.delta_look)
        pct = "" if verdict.delta.pct is None else f" ({fmt_signed(verdict.delta.pct / 100.0, fmt_pct)})"
        noise = "" if verdict.noise_known else ", no noise estimate (one step on each side)"
        lines.append(
            f"  {verdict.figure.label}: {_spread_text(verdict, 'live')} vs "
            f"{_spread_text(verdict, 'baseline')}: {delta}{pct} {verdict.word}{noise}"
        )
    return lines
