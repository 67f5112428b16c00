"""A comparison as terminal text: the refusal (every difference with each run's value, and what to write
instead), or the runs, what was varied and matched, each run's knee, then one table per level: each figure's
value per run (the median and range over repeats), and for every run after the first its delta, % and a
mark ("within noise", "better", "worse"). A forced comparison's warning heads the text and every table.

Numbers are written by ``loadgen.format``; values of conditions by ``conditions.show``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from loadgen.analysis.comparison import (
    NOISE_FLOOR_PCT,
    Comparison,
    Delta,
    Knee,
    LevelComparison,
    MetricRow,
    warning_line,
)
from loadgen.analysis.conditions import CLIENT_BOUND, Difference, conditions_of, show
from loadgen.analysis.quality import changed_text
from loadgen.analysis.runs import Run, Spread
from loadgen.format import NA, fmt_count, fmt_num_wide, fmt_pct_wide, fmt_range, fmt_signed

__all__ = ["format_comparison", "format_refusal"]

MAX_DIFFERENCE_ROWS = 16  # the refusal fits one screen
MAX_VALUE = 40
_GAP = "  "


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def align(rows: Sequence[Sequence[str]], left: frozenset[int] = frozenset({0})) -> list[str]:
    """Rows of cells as aligned lines: the columns in ``left`` flush left, the others flush right."""
    if not rows:
        return []
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(w) if c in left else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(_GAP.join(cells).rstrip())
    return lines


def _shown(d: Difference) -> list[str]:
    unset = "unset" if d.key.startswith("profile.") else "unknown"
    return [_cut(show(v, unset)) for v in d.values]


def _difference_rows(diffs: Sequence[Difference], labels: Sequence[str], prefix: str = "") -> list[list[str]]:
    return [
        [f"  {prefix}{d.key}", *(f"{label} {value}" for label, value in zip(labels, _shown(d), strict=True))]
        for d in diffs
    ]


def _names(runs: Sequence[Run]) -> str:
    named = [f"{run.path} ({run.label})" for run in runs]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def format_refusal(comparison: Comparison) -> str:
    """Why the runs may not be compared as they are, and what to write instead."""
    labels = [run.label for run in comparison.runs]
    unmatched = list(comparison.unmatched)
    shown = unmatched[:MAX_DIFFERENCE_ROWS]
    rows = _difference_rows(shown, labels)
    rows += _difference_rows([d for d in comparison.differences if d.varied], labels, "varied: ")
    lines = [f"ramp compare: refused: {_names(comparison.runs)} differ in more than what is varied"]
    lines += align(rows, frozenset(range(len(labels) + 1)))
    if len(unmatched) > len(shown):
        lines.append(
            f"  … and {len(unmatched) - len(shown)} more (ramp compare --format json lists them all)"
        )
    lines += _client_bound_lines(comparison)
    names = dict.fromkeys(d.vary for d in unmatched if d.key != CLIENT_BOUND)
    if names:
        suggest = " ".join(f"--vary {name}" for name in names)
        lines.append(
            f"Name each variable under test with --vary (here: {suggest}), or add --force to compare anyway "
            "(every table then carries a warning)."
        )
    return "\n".join(lines)


def _client_bound_lines(comparison: Comparison) -> list[str]:
    """A run that was client-bound is no variable to name: which run it was, where, and what to do."""
    found = next((d for d in comparison.unmatched if d.key == CLIENT_BOUND), None)
    if found is None:
        return []
    lines = []
    for run, value in zip(comparison.runs, found.values, strict=True):
        if value not in (None, "none"):
            lines.append(
                f"Run {run.label} ({run.path}) was client-bound at {show(value)}: the load generator may have "
                "limited it there (its step lines say why). Rerun it on a quieter host or with more load "
                "workers (--workers N), or add --force to compare anyway."
            )
    return lines


def _run_line(run: Run) -> str:
    header = run.header
    model = str(header.get("model") or NA)
    if header.get("model_revision"):
        model += f" (revision {header['model_revision']})"
    runtime = (
        " ".join(str(header[k]) for k in ("runtime", "runtime_version") if header.get(k)) or "runtime n/a"
    )
    steps = len(run.steps)
    return f"{run.label}  {run.path} · {model} · {runtime} · profile {header.get('profile') or NA} · {steps} step{'s' * (steps != 1)}"


def _knee_line(run: Run, knee: Knee | None) -> str:
    if knee is None:
        return f"knee {run.label}: none (no clean step met the SLO)"
    line = f"knee {run.label}: {knee.level.label}, {fmt_num_wide(knee.out_tok_s)} out tok/s"
    if knee.spread is not None and knee.repeats > 1:
        line += (
            f" (median of {knee.repeats}, {fmt_num_wide(knee.spread.low)}–{fmt_num_wide(knee.spread.high)})"
        )
    return line


def _matched_line(comparison: Comparison) -> list[str]:
    different = {
        d.key.split(".", 1)[0] if d.key.startswith("profile.") else d.key for d in comparison.differences
    }
    keys = [k for k in conditions_of(comparison.runs[0]) if k not in different]
    text = f"matched: {', '.join(keys)} ({len(keys)} conditions)"
    return textwrap.wrap(text, width=110, subsequent_indent="         ")


def _head(comparison: Comparison) -> list[str]:
    lines = [f"WARNING: {warning_line(comparison)}", ""] if comparison.forced else []
    lines += [_run_line(run) for run in comparison.runs]
    labels = [run.label for run in comparison.runs]
    varied = [d for d in comparison.differences if d.varied]
    lines += align(_difference_rows(varied, labels, "varied: "), frozenset(range(len(labels) + 1)))
    for name in comparison.vary:
        if not any(d.varied for d in varied if name == d.vary or name == d.key):
            lines.append(f"  varied: {name} (no difference found in it)")
    lines += _matched_line(comparison)
    lines += [_knee_line(run, knee) for run, knee in zip(comparison.runs, comparison.knees, strict=True)]
    return lines


def _cell(spread: Spread | None, row: MetricRow) -> str:
    if spread is None:
        return NA
    look = row.figure.look
    if spread.n == 1:
        return look(spread.median)
    return fmt_range(spread.median, spread.low, spread.high, look)


def _delta_cells(delta: Delta | None, row: MetricRow) -> list[str]:
    if delta is None:
        return [NA, "", ""]
    pct = NA if delta.pct is None else fmt_signed(delta.pct / 100.0, fmt_pct_wide)
    mark = delta.mark
    if delta.noise == "interval" and delta.half is not None:
        mark = f"within noise (±{row.figure.delta_look(delta.half).strip()})"
    elif delta.noise == "open":
        mark = "within noise (too few values to bound)"
    return [fmt_signed(delta.delta, row.figure.delta_look), pct, mark]


def _title(level: LevelComparison, runs: Sequence[Run]) -> str:
    parts = [level.key.label]
    for run, steps in zip(runs, level.steps, strict=True):
        if steps is None:
            parts.append(f"{run.label} not run")
            continue
        cut = (
            f" ({fmt_count(steps.left_out)} cut step{'s' * (steps.left_out != 1)} left out)"
            if steps.left_out
            else ""
        )
        if steps.other_passes:
            n = steps.other_passes
            cut += f" ({fmt_count(n)} step{'s' * (n != 1)} of another pass left out: not a --repeat)"
        parts.append(f"{run.label} ×{steps.repeats}{cut}")
    return " · ".join(parts)


def _level_lines(level: LevelComparison, comparison: Comparison) -> list[str]:
    runs = comparison.runs
    lines = [_title(level, runs)]
    if comparison.forced:
        keys = [d.key for d in comparison.unmatched]
        keys = list(dict.fromkeys("profile" if k.startswith("profile.") else k for k in keys))
        lines.append(f"! not matched: {', '.join(keys)} differ{'s' * (len(keys) == 1)} (--force)")
    bound = [run.label for run, b in zip(runs, level.client_bound, strict=True) if b]
    if bound:
        lines.append(f"! client-bound in {', '.join(bound)}: the load generator may have limited this level")
    if any(level.limits):
        said = [f"{run.label} {limit or 'n/a'}" for run, limit in zip(runs, level.limits, strict=True)]
        lines.append(f"limit (diagnosis): {' · '.join(said)}")
    lines += _quality_lines(level, runs)
    head = ["metric", runs[0].label]
    for run in runs[1:]:
        head += [run.label, f"Δ {run.label}", f"% {run.label}", ""]
    rows = [head]
    for row in level.rows:
        cells = [row.figure.label, _cell(row.values[0], row)]
        for spread, delta in zip(row.values[1:], row.deltas[1:], strict=True):
            cells += [_cell(spread, row), *_delta_cells(delta, row)]
        rows.append(cells)
    marks = frozenset({0, *(5 + 4 * i for i in range(len(runs) - 1))})
    return lines + align(rows, marks)


def _quality_lines(level: LevelComparison, runs: Sequence[Run]) -> list[str]:
    """Each later run whose answers agree less than the first run's: ``B faster, but answers changed:
    agreement 0.62 (0.55–0.69) vs 1.00`` (faster: its out tok/s marked better)."""
    base = level.quality[0] if level.quality else None
    out = next((row for row in level.rows if row.figure.key == "out_tok_s"), None)
    lines = []
    for i, (run, changed) in enumerate(zip(runs, level.changed, strict=False)):
        q = level.quality[i]
        if not changed or base is None or q is None:
            continue
        delta = out.deltas[i] if out is not None else None
        faster = delta is not None and delta.mark.startswith("better")
        lines.append("! " + changed_text(run.label, faster, base, q))
    return lines


def format_comparison(comparison: Comparison) -> str:
    """The whole comparison as text (``comparison`` is not refused)."""
    blocks = ["\n".join(_head(comparison))]
    blocks += ["\n".join(_level_lines(level, comparison)) for level in comparison.levels]
    notes = [f"{key.label}: only in {', '.join(labels)}" for key, labels in comparison.only_in]
    if not comparison.levels:
        notes.append("no level was run by two of these runs: nothing to compare step by step")
    if any(
        d is not None and d.noise not in ("interval", "open") and d.lo is None
        for level in comparison.levels
        if any(s is not None and s.repeats == 1 for s in level.steps)
        for row in level.rows
        for d in row.deltas
    ):
        notes.append(
            "levels measured once have no noise estimate: a difference under "
            f'{NOISE_FLOOR_PCT:g} % there reads "within noise" (the default floor); repeat each level '
            "(--repeat N) to tell a difference from noise"
        )
    if notes:
        blocks.append("\n".join(notes))
    return "\n\n".join(blocks)
