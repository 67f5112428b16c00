"""The SLA search in the console (``Snapshot.search``): what the header says it is doing and why, and the
curve panel's plot of it as it forms. Pure: no widget, no app.

``search_text`` (``search_parts``: its head and the rest): 'probing 24: TTFT p95 96 ± 6 ms, undecided, ≈8 s' (the SLO figure with the least room so
far, its 95 % interval's half-width, where it stands against its limit and the most the probe has left);
'probing 24 again (undecided at its maximum length…)'; 'search paused: operator took over (f resumes)';
'search done: max 4 streams …'; 'search stopped (…)'; 'following the knee at 4: TTFT p95 21 ± 2 ms, met so
far, ≈20 s (f stops following)' once it holds the answer and judges its steps.

``render_knee``: each probe's SLO use against its level — the tightest objective's figure as a share of
its limit (1 - ``loadgen.slo.margin``: 100 % is the limit, the SLO line ┄) — with its verdict (● met, ✕
missed, ? undecided, ◆ a level the operator set), the monotone fit (·) between them, the bracket (│ at the
highest level that meets and the lowest that misses) and ▲ under the level probed now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from loadgen import measures
from loadgen.format import fmt_si
from loadgen.metrics.slices import FAR, figure_name
from loadgen.snapshot import METRICS, SearchProbe, SearchView, Snapshot
from loadgen.stats import Interval
from tui.line import fit_line, piece
from tui.margins import about
from tui.plot import place_labels

KNEE_MARKERS = {"met": "●", "missed": "✕", "undecided": "?", "operator": "◆"}
FIT, BRACKET, SLO_LINE, NOW = "·", "│", "┄", "▲"
PROBE_STYLES = {"met": "met", "missed": "miss", "undecided": "none", "operator": "selected"}
MAX_USE = 3.0  # the y axis stops at 3x the limit: a probe far past it sits on the top edge


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def live_figure(snapshot: Snapshot) -> str:
    """'TTFT p95 96 ± 6 ms, undecided': the judged figure with the least room so far, its 95 % interval (one
    side only while too few values lie beyond the percentile: '271 ms (95 %: ≥239)'), and where it stands
    against its limit by the rule that ends a probe (``loadgen.metrics.slices.decided``: an interval not
    trusted decides only ``FAR`` beyond the limit); '' before any figure."""
    limits = snapshot.slo.as_dict()
    best: tuple[float, str] | None = None
    for clause in measures.CLAUSES:
        limit = limits.get(clause.key)
        iv = snapshot.live_margins.get(figure_name(clause.metric, clause.point)) if clause.metric else None
        if not limit or iv is None:
            continue
        value = iv.value * clause.scale
        far = 1.0 if iv.trusted else FAR
        lo = None if iv.lo is None else iv.lo * clause.scale
        hi = None if iv.hi is None else iv.hi * clause.scale
        if clause.at_most:
            past, within = lo is not None and lo > limit * far, hi is not None and hi <= limit / far
        else:
            past, within = hi is not None and hi < limit / far, lo is not None and lo >= limit * far
        stands = "missed" if past else "met so far" if within else "undecided"
        text = f"{clause.label} {figure_text(iv, METRICS.get(clause.metric, ''))}, {stands}"
        room = (limit - value) / limit if clause.at_most else (value - limit) / limit
        if best is None or room < best[0]:
            best = (room, text)
    return "" if best is None else best[1]


def figure_text(iv: Interval, unit: str) -> str:
    """'96 ± 6 ms'; '271 ms (95 %: ≥239)' with one side; '271 ms' with none."""

    def num(x: float) -> str:  # 96, 6, 21.7, 1234 (ms); 4.39k (tok/s)
        if unit != "ms":
            return fmt_si(x)
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"

    if iv.lo is not None and iv.hi is not None:
        return f"{num(iv.value)} ± {num((iv.hi - iv.lo) / 2)} {unit}"
    side = (
        f" (95 %: ≥{num(iv.lo)})"
        if iv.lo is not None
        else f" (95 %: ≤{num(iv.hi)})"
        if iv.hi is not None
        else ""
    )
    return f"{num(iv.value)} {unit}{side}"


def probing_text(snapshot: Snapshot, level: float) -> str:
    """'24: TTFT p95 96 ± 6 ms, undecided, ≈8 s' for the step under way at the probed level."""
    phase = snapshot.phase if not snapshot.warming_up else "warmup"
    if snapshot.state == "paused":
        return f"{level:g}: paused"
    if phase == "warmup":
        return f"{level:g}: warming up"
    if phase in ("closing", "settling"):
        return f"{level:g}: {phase}"
    parts = [f"{level:g}:", live_figure(snapshot) or "measuring"]
    if snapshot.step_remaining_s is not None:
        parts.append(f"≈{about(snapshot.step_remaining_s)}")
    return parts[0] + " " + ", ".join(parts[1:])


def search_parts(snapshot: Snapshot) -> tuple[str, str]:
    """What the search is doing ('probing 24') and the rest of the phrase (': TTFT p95 96 ± 6 ms, undecided,
    ≈8 s'), so that a narrow header keeps the first; ('', '') without a search."""
    view = snapshot.search
    if view is None:
        return "", ""
    if view.state == "probing" and view.level is not None:
        level, _, rest = probing_text(snapshot, view.level).partition(": ")
        again = f" again ({view.why})" if view.why else ""  # probed again: why
        return f"probing {level}", f"{again}: {rest}"
    if view.state == "held":
        probing = snapshot.auto_ramp and view.level is not None and snapshot.step_remaining_s is not None
        mine = f" · your probe {probing_text(snapshot, view.level or 0.0)}" if probing else ""
        return "search paused: operator took over", f" (f resumes){mine}"
    if view.state == "stopped":
        return "search stopped", f" ({view.why})"
    if view.state == "following" and view.level is not None:
        level, _, rest = probing_text(snapshot, view.level).partition(": ")
        if view.why == "room above":  # the probe of the level above a knee that met: is there room now?
            return f"room above the knee? probing {level}", f": {rest} (f stops following)"
        return f"following the knee at {level}", f": {rest} (f stops following)"
    return "search done", f": {view.summary or view.why}"


def search_text(snapshot: Snapshot) -> str:
    """What the search is doing and why, in one phrase ('' without a search)."""
    return "".join(search_parts(snapshot))


def probe_kind(p: SearchProbe) -> str:
    if p.by_operator:
        return "operator"
    if p.verdict == "undecided":
        return "undecided"
    return "met" if p.met else "missed"


def knee_legend(view: SearchView) -> str:
    kinds = {probe_kind(p) for p in view.probes}
    words = [f"{KNEE_MARKERS[k]} {k}" for k in KNEE_MARKERS if k in kinds]
    if view.fit:
        words.append(f"{FIT} fit")
    if view.met is not None and view.missed is not None:
        words.append(f"{BRACKET} {view.met:g}–{view.missed:g} {view.shape} {view.confidence}".rstrip())
    return "  ".join(words)


@dataclass(frozen=True, slots=True)
class KneeScale:
    """Where a level (x) and an SLO use (y, a share of the limit) fall on the plot's cells."""

    x_lo: float
    x_hi: float
    y_hi: float
    width: int
    height: int

    @classmethod
    def of(cls, view: SearchView, width: int, height: int) -> KneeScale:
        uses = [1 - p.margin for p in view.probes]
        levels = [p.level for p in view.probes] + ([view.level] if view.level is not None else [])
        pad = (max(levels) - min(levels)) * 0.05 or 1.0
        y_hi = min(MAX_USE, max(1.2, max(uses) * 1.05))
        return cls(max(0.0, min(levels) - pad), max(levels) + pad, y_hi, width, height)

    def col(self, level: float) -> int:
        return min(
            self.width - 1, max(0, round((level - self.x_lo) / (self.x_hi - self.x_lo) * (self.width - 1)))
        )

    def row(self, use: float) -> int:
        return self.height - 1 - min(self.height - 1, max(0, round(use / self.y_hi * (self.height - 1))))


Cells = list[list[tuple[str, Style | str]]]


def knee_cells(view: SearchView, scale: KneeScale, styles: Mapping[str, Style]) -> Cells:
    """The SLO line, the bracket, the fit between the probed levels and the probes, in that order (a later
    one drawn over an earlier one)."""
    cells: Cells = [[(" ", "")] * scale.width for _ in range(scale.height)]
    cells[scale.row(1.0)] = [(SLO_LINE, _s(styles, "slo"))] * scale.width
    for side, style in ((view.met, "met"), (view.missed, "miss")):
        if side is not None:
            for r in range(scale.height):
                cells[r][scale.col(side)] = (BRACKET, _s(styles, style))
    fit = sorted(view.fit)
    for (x0, m0), (x1, m1) in zip(fit, fit[1:], strict=False):
        c0, c1 = scale.col(x0), scale.col(x1)
        for c in range(c0, c1 + 1):
            share = 0.0 if c1 == c0 else (c - c0) / (c1 - c0)
            r = scale.row(1 - (m0 + (m1 - m0) * share))
            if cells[r][c][0] in (" ", SLO_LINE):
                cells[r][c] = (FIT, _s(styles, "fit"))
    for p in view.probes:
        kind = probe_kind(p)
        cells[scale.row(1 - p.margin)][scale.col(p.level)] = (
            KNEE_MARKERS[kind],
            _s(styles, PROBE_STYLES[kind]),
        )
    return cells


def render_knee(view: SearchView, width: int, height: int, styles: Mapping[str, Style] | None = None) -> Text:
    """The search's probes, fit, SLO line and bracket: SLO use (y) against the level (x)."""
    styles = styles or {}
    dim = _s(styles, "dim")
    title = fit_line(
        [
            piece(("SLO use", _s(styles, "strong")), (" vs ", dim), ("level", _s(styles, "strong"))),
            piece(("  ┄ SLO 100 %", _s(styles, "slo")), keep=2),
            piece((f"  range {view.lo:g}–{view.hi:g}", dim), keep=1),
        ],
        width,
    )
    if not view.probes or width < 16 or height < 5:
        why = (
            "the first probe is under way"
            if not view.probes
            else "too small to draw: a wider terminal or tab 5"
        )
        return Text.assemble(title, ("\n", ""), (why, dim))
    label_w = 5
    scale = KneeScale.of(view, width - label_w - 2, height - 3)
    y_labels = {0: f"{scale.y_hi * 100:.0f}%", scale.row(1.0): "100%"}
    lines = [title]
    for r, cells in enumerate(knee_cells(view, scale, styles)):
        label = (f"{y_labels.get(r, ''):>{label_w}} ", dim)
        lines.append(Text.assemble(label, ("│", dim), *cells, no_wrap=True, overflow="crop"))
    lines.append(Text.assemble((" " * (label_w + 1), dim), ("└" + "─" * scale.width, dim), no_wrap=True))
    marks = [(scale.col(view.level), NOW, _s(styles, "strong"))] if view.level is not None else []
    marks += [(scale.col(x), f"{x:g}", dim) for x in sorted({p.level for p in view.probes})]
    axis = place_labels(scale.width, marks)
    lines.append(Text.assemble(" " * (label_w + 2), axis, no_wrap=True, overflow="crop"))
    return Text("\n", no_wrap=True, overflow="crop").join(lines[:height])
