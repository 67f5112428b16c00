"""The ramp table: one row per finished step (``Snapshot.steps``), the best step under the SLO starred.

Each row says what its verdict stands on: the failing SLO clause in the SLO cell, and notes for a step
the client limited (``StepSummary.client_bound``) or a manual change cut (``carried_share``). The core
columns (``#``, level, tok/s, dec p50, TTFT p50, TTFT p95, e2e p95, err, SLO) stay at any panel a ≥ 120
column terminal gives the table: on a narrow panel the extra columns give way first, then the SLO cell
shortens, then the gap between columns narrows, and only then TTFT p50 and err; the notes keep whole
notes, "cut N%" first, in the room left. ``d`` opens every figure of a step (``tui.detail``).

With a baseline (``--baseline``, ``tui.baseline``) a "vs base" column says per step how its out tok/s and
the SLO's figure stand against the baseline at its level: better, worse, or within noise ("?": one step on
each side, no noise estimate); it stays at any width, its percentages giving way first, then its words
to ▲ ▼ ≈ = (better, worse, within noise, same).

Priced runs (``[pricing]`` or the price flags) get a "$/1M" column, the step's cost per 1M output tokens
(GPU hours when priced so, else the token bill: ``loadgen.analysis.cost``); an SLO with per-request limits
gets "good/s", the goodput in requests/s that met them. Both give way first on a narrow panel. A run with
answer probes (``--quality``) gets "quality", each step's answer agreement with its 95 % interval
(``loadgen.analysis.quality``), marked bad where the interval lies below 1 (the answers changed). A level run
more than once (``--repeat``) shows its out tok/s as "median (min–max)" in the subtitle, for the best step's
level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich import box
from rich.style import Style
from rich.table import Table
from rich.text import Text

from loadgen import measures
from loadgen.analysis.baseline import StepVerdict, slo_figure
from loadgen.analysis.cost import step_cost, task_turns
from loadgen.analysis.diagnosis import diagnosis_line
from loadgen.analysis.quality import agreement_text, below_one
from loadgen.analysis.runs import level_key, levels_of, spread
from loadgen.format import NA, fmt_count, fmt_ms, fmt_range, fmt_rate, fmt_si, fmt_usd
from loadgen.metrics.slices import figure_name
from loadgen.profile import Pricing
from loadgen.run.config import RunConfig
from loadgen.snapshot import Snapshot, StepSummary
from tui.baseline import GLYPHS, WORDS, LiveBaseline
from tui.baseline import verdict_cell as baseline_cell
from tui.format import fit_notes, step_note_parts, step_notes, verdict_cell, verdict_label
from tui.margins import margin_text
from tui.panel import SnapshotPanel
from tui.view import ViewState


def _s(styles: Mapping[str, Style], name: str) -> Style:
    return styles.get(name, Style.null())


def level_text(step: StepSummary) -> str:
    if step.mode == "open":
        return fmt_rate(step.rate_rps).replace(" req/s", "/s")
    return str(step.level)


def starred(steps: Sequence[StepSummary], best_step: int | None) -> int | None:
    """The position that gets the best-step star: only ever a clean step (one no manual change cut)."""
    if best_step is None or not 0 <= best_step < len(steps) or not steps[best_step].clean:
        return None
    return best_step


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    cell: Callable[[StepSummary], str]
    key: bool  # kept at any width
    left: bool = False


BASE = "vs base"
SELECTED = "▸"  # ramp replay: the step looked at
COST, GOOD, TTFAT = "$/1M", "good/s", "TTFAT p95"  # TTFAT: shown when a step's requests reasoned
TTFTC = "TTFTC p95"  # shown when a step's requests called a tool
Verdicts = Mapping[int, StepVerdict]  # StepSummary.index -> its verdict against the baseline


@dataclass(frozen=True, slots=True)
class Pricer:
    """What prices a step in the table: the run's pricing, and the mean turns of a task (None: a request)."""

    pricing: Pricing
    turns: float | None = None

    @classmethod
    def of(cls, config: RunConfig | None) -> Pricer | None:
        if config is None or config.pricing is None:
            return None
        return cls(config.pricing, task_turns({"profile_content": config.profile.to_dict()}))

    def per_1m_output(self, step: StepSummary) -> str:
        primary = step_cost(step, self.pricing, self.turns).primary
        return fmt_usd(None if primary is None else primary.per_1m_output)


def _goodput(step: StepSummary) -> str:
    good = step.stats.goodput_req_s
    return NA if good is None else fmt_rate(good).replace(" req/s", "/s")


def columns(
    compact: int = 0, verdicts: Verdicts | None = None, pricer: Pricer | None = None
) -> tuple[Column, ...]:
    """The table's columns; ``compact`` shortens the SLO cell (see ``verdict_cell``) and the baseline's
    (``verdicts``; no such column without them); ``pricer`` adds the cost column."""
    base = (
        ()
        if verdicts is None
        else (Column(BASE, lambda s: baseline_cell(verdicts.get(s.index), compact), True, left=True),)
    )
    cost = () if pricer is None else (Column(COST, pricer.per_1m_output, False),)
    return (
        Column("#", lambda s: str(s.index + 1), True, left=True),
        Column("level", level_text, True),
        Column("tok/s", lambda s: fmt_si(s.stats.out_tok_s), True),
        Column("dec p50", lambda s: fmt_si(s.stats.pct(measures.DECODE_TOK_S).p50), True),
        Column("TTFT p50", lambda s: fmt_ms(s.stats.pct(measures.TTFT_MS).p50), False),
        Column("TTFT p95", lambda s: fmt_ms(s.stats.pct(measures.TTFT_MS).p95), True),
        Column(MARGIN, lambda s: margin_text(s.margins.get(TTFT_P95)), False),
        Column(TTFAT, lambda s: fmt_ms(s.stats.pct(measures.TTFAT_MS).p95), False),
        Column(TTFTC, lambda s: fmt_ms(s.stats.pct(measures.TTFTC_MS).p95), False),
        Column("e2e p95", lambda s: fmt_ms(s.stats.pct(measures.E2E_MS).p95), True),
        Column(GOOD, _goodput, False),
        *cost,
        Column("err", lambda s: fmt_count(s.stats.error_count), False),
        Column(QUALITY, lambda s: agreement_text(s.quality) if s.quality else "", False),
        Column("SLO", lambda s: verdict_cell(s.verdict, compact), True, left=True),
        *base,
        Column(LIMIT, lambda s: str(s.diagnosis.get("kind") or ""), False, left=True),
        Column("notes", lambda s: step_notes(s.client_bound, s.carried_share, s.flags), True, left=True),
    )


MARGIN = "±"  # TTFT p95's 95 % margin beside it (tui.margins), where the step has one
TTFT_P95 = figure_name(measures.TTFT_MS, "p95")
QUALITY = "quality"  # the step's answer agreement (--quality): only when a step has probes
LIMIT = "limit"  # the step's diagnosis (loadgen.analysis.diagnosis): what stops it scaling
GAP = 2  # cells between two columns: the right padding and the box's (blank) divider
# The first to give way on a narrow panel, before the SLO cell shortens and the gaps narrow to one cell
EXTRA_ORDER = (MARGIN, LIMIT, TTFTC, TTFAT, COST, GOOD, QUALITY)
# Core columns that still give way, last, on a panel narrower than a 120-column terminal gives the table
# (level, tok/s, decode p50, TTFT p95, e2e p95 and SLO never do: the notes are cut to the room left).
LAST_ORDER = ("TTFT p50", "err")
# (gap, SLO cell compactness) tried in turn once the extra columns are gone
SQUEEZES = ((GAP, 0), (GAP, 1), (GAP, 2), (1, 2))
NOTES = "notes"
NOTES_MIN = 7  # "⚠bound", "cut 23%": what the notes keep before an optional column gives way to them


@dataclass(frozen=True, slots=True)
class Layout:
    columns: list[Column]
    gap: int = GAP


def natural_width(column: Column, steps: Sequence[StepSummary]) -> int:
    cells = [len(column.cell(s)) for s in steps]
    return max([len(column.header), *cells]) + (1 if column.header == "#" else 0)  # the star


def fit_layout(
    steps: Sequence[StepSummary],
    width: int | None,
    verdicts: Verdicts | None = None,
    pricer: Pricer | None = None,
) -> Layout:
    """The columns that fit ``width`` (all of them when None), and the gap between them: the extra columns
    give way first, then the SLO cell shortens, then the gap narrows, then TTFT p50 and err; the notes count
    for at most ``NOTES_MIN`` (they are cut to what is left: see ``notes_width``); an empty notes column,
    and goodput or the limit when no step has one, are left out."""
    has_goodput = any(s.stats.goodput_req_s is not None for s in steps)
    reasoned = any(s.stats.reasoned for s in steps)
    called = any(s.stats.tool_calls for s in steps)
    diagnosed = any(s.diagnosis for s in steps)
    margined = any(TTFT_P95 in s.margins for s in steps)
    probed = any(s.quality for s in steps)

    def total(chosen: list[Column], gap: int) -> int:
        widths = [
            min(NOTES_MIN, natural_width(c, steps)) if c.header == NOTES else natural_width(c, steps)
            for c in chosen
        ]
        return sum(widths) + gap * (len(chosen) - 1)

    def candidates(compact: int) -> list[Column]:
        return [
            c
            for c in columns(compact, verdicts, pricer)
            if (c.header != NOTES or any(c.cell(s) for s in steps))
            and (c.header != GOOD or has_goodput)
            and (c.header != TTFAT or reasoned)
            and (c.header != TTFTC or called)
            and (c.header != LIMIT or diagnosed)
            and (c.header != MARGIN or margined)
            and (c.header != QUALITY or probed)
        ]

    def without(chosen: list[Column], order: Sequence[str], gap: int) -> list[Column]:
        for header in order:
            if width is None or total(chosen, gap) <= width:
                break
            chosen = [c for c in chosen if c.header != header]
        return chosen

    chosen: list[Column] = []
    for gap, compact in SQUEEZES:
        chosen = without(candidates(compact), EXTRA_ORDER, gap)
        if width is None or total(chosen, gap) <= width:
            return Layout(chosen, gap)
    gap = SQUEEZES[-1][0]
    return Layout(without(chosen, LAST_ORDER, gap), gap)


def fitting_columns(
    steps: Sequence[StepSummary],
    width: int | None,
    verdicts: Verdicts | None = None,
    pricer: Pricer | None = None,
) -> list[Column]:
    """The columns ``fit_layout`` keeps."""
    return fit_layout(steps, width, verdicts, pricer).columns


def notes_width(
    columns: Sequence[Column], steps: Sequence[StepSummary], width: int | None, gap: int = GAP
) -> int | None:
    """The room the notes have: what the other columns leave of ``width`` (None: their own width)."""
    if width is None:
        return None
    others = [natural_width(c, steps) for c in columns if c.header != NOTES]
    return max(1, width - sum(others) - gap * len(others))


def render_steps_table(
    steps: Sequence[StepSummary],
    best_step: int | None,
    height: int,
    *,
    width: int | None = None,
    styles: Mapping[str, Style] | None = None,
    verdicts: Verdicts | None = None,
    pricer: Pricer | None = None,
    selected: int | None = None,
) -> Table | Text:
    """The last rows that fit in ``height`` (header included), the columns that fit in ``width``; with
    ``verdicts``, each step against the baseline; with ``pricer``, what each step cost."""
    styles = styles or {}
    if not steps:
        return Text("no finished steps yet", style=_s(styles, "dim"))
    layout = fit_layout(steps, width, verdicts, pricer)
    columns = layout.columns
    table = Table(
        box=box.SIMPLE_HEAD, padding=(0, layout.gap - 1, 0, 0), expand=False, show_edge=False, pad_edge=False
    )
    room = notes_width(columns, steps, width, layout.gap)
    for column in columns:
        notes = column.header == NOTES
        table.add_column(
            column.header,
            justify="left" if column.left else "right",
            no_wrap=True,
            min_width=min(len(column.header), room or len(column.header)) if notes else len(column.header),
            max_width=room if notes else None,
            overflow="ellipsis",
        )
    star = starred(steps, best_step)
    visible = max(1, height - 2)
    first = max(0, len(steps) - visible)
    if selected is not None and 0 <= selected < len(steps):
        first = min(first, selected)  # the step looked at (ramp replay) stays in view
    for position in range(first, min(len(steps), first + visible)):
        step = steps[position]
        cells = [cell_text(column, step, position == star, styles, room) for column in columns]
        row_style = _s(styles, "best") if position == star else None
        if position == selected:
            row_style = _s(styles, "selected")
            if position != star:
                cells[0] = Text(SELECTED + cells[0].plain[1:])
        table.add_row(*cells, style=row_style)
    return table


def cell_text(
    column: Column, step: StepSummary, best: bool, styles: Mapping[str, Style], room: int | None = None
) -> Text:
    if column.header == NOTES:  # whole notes, "cut N%" first, never cut mid-way to make room for another
        parts = step_note_parts(step.client_bound, step.carried_share, step.flags)
        return Text(fit_notes(parts, room), style=_s(styles, "warn"), no_wrap=True, overflow="ellipsis")
    text = column.cell(step)
    if column.header == "#":
        return Text(("★" if best else " ") + text)
    if column.header == "err":
        return Text(text, style=_s(styles, "bad") if step.stats.error_count else "")
    if column.header == "SLO":
        verdict = verdict_label(step.verdict)
        return Text(text, style=_s(styles, {"met": "good", "miss": "bad"}.get(verdict, "dim")))
    if column.header == BASE:
        return base_text(text, styles)
    if column.header == QUALITY:
        return Text(text, style=_s(styles, "bad") if below_one(step.quality) else "")
    return Text(text)


_WORD_STYLE = {
    WORDS["better"]: "good",
    WORDS["worse"]: "bad",
    GLYPHS["better"]: "good",
    GLYPHS["worse"]: "bad",
}


def base_text(text: str, styles: Mapping[str, Style]) -> Text:
    """The baseline cell, each verdict in its colour (better good, worse bad, the rest dim)."""
    out = Text()
    for n, part in enumerate(text.split(" · ")):
        if n:
            out.append(" · ", style=_s(styles, "dim"))
        word = part.rsplit(" ", 1)[-1].rstrip("?")
        out.append(part, style=_s(styles, _WORD_STYLE.get(word, "dim")))
    return out


def repeats_text(steps: Sequence[StepSummary], position: int) -> str:
    """The out tok/s of the level of ``steps[position]`` over its clean repeats, "" when it ran once."""
    level = levels_of(steps).get(level_key(steps[position]))
    if level is None or position not in level.at:  # another pass at the level: not one of its repeats
        return ""
    found = None if level.repeats < 2 else spread(steps[at].stats.out_tok_s for at in level.at)
    if found is None:
        return ""
    return f"×{level.repeats}: {fmt_range(found.median, found.low, found.high, fmt_si)} tok/s"


class StepsPanel(SnapshotPanel):
    COMPONENT_CLASSES = {
        "steps--dim",
        "steps--best",
        "steps--good",
        "steps--bad",
        "steps--warn",
        "steps--selected",
    }
    DEFAULT_CSS = """
    StepsPanel > .steps--selected { background: $accent-muted; text-style: bold; }
    """

    def __init__(
        self,
        *,
        id: str | None = None,
        classes: str | None = None,
        baseline: LiveBaseline | None = None,
        pricer: Pricer | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.baseline = baseline
        self.pricer = pricer

    def verdicts(self, snapshot: Snapshot) -> Verdicts | None:
        return None if self.baseline is None else self.baseline.verdicts(snapshot.steps, snapshot.slo)

    def inputs(self, snapshot: Snapshot, view: ViewState) -> object:
        return (
            len(snapshot.steps),
            snapshot.best_step,
            snapshot.slo if self.baseline else None,
            snapshot.selected,
            diagnosis_line(snapshot.live_diagnosis),  # the measuring step's, changed once a second at most
        )

    def update_titles(self, snapshot: Snapshot, view: ViewState) -> None:
        best = starred(snapshot.steps, snapshot.best_step)
        self.border_title = "Ramp steps"
        if self.baseline is not None and self.baseline.run is not None:
            figure = slo_figure(snapshot.slo).label.removesuffix(" ms").removesuffix(" s")
            self.border_title = f"Ramp steps · {BASE}: tok/s · {figure}"
        if best is not None and best < len(snapshot.steps):
            step = snapshot.steps[best]
            repeats = repeats_text(snapshot.steps, best)
            self.border_subtitle = f"best under SLO: step {step.index + 1} · " + (
                repeats or f"{fmt_si(step.stats.out_tok_s)} tok/s"
            )
        else:
            self.border_subtitle = "no step under the SLO yet" if snapshot.steps else ""
        if snapshot.steps:
            self.border_subtitle = f"{self.border_subtitle} · d: details"
        # the measuring step's so far (provisional), else the last finished step's: the full evidence is in d
        latest = diagnosis_line(snapshot.live_diagnosis) or (
            diagnosis_line(snapshot.steps[-1].diagnosis) if snapshot.steps else ""
        )
        if latest:
            self.border_title = f"{self.border_title} · {latest}"

    def draw(self, snapshot: Snapshot, view: ViewState, width: int, height: int) -> Table | Text:
        styles = {name.removeprefix("steps--"): self.style_of(name) for name in self.COMPONENT_CLASSES}
        return render_steps_table(
            snapshot.steps,
            snapshot.best_step,
            height,
            width=width,
            styles=styles,
            verdicts=self.verdicts(snapshot),
            pricer=self.pricer,
            selected=snapshot.selected,
        )
