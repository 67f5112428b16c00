"""Every figure of one finished step, as Rich renderables for the step detail view (``d``).

What a step's verdict stands on comes first (the SLO clauses with the step's own figures, the failure
lines, whether the client was the bottleneck and why, the answer probes' agreement (``--quality``), whether
a manual change cut it), then how the load was held (warm-up, window, closing time), counts and tokens,
every percentile, errors by kind with the latest full message of each kind, the server's figures over the
step's window, and the operator's marks.
Pure: a ``StepSummary`` (and the run's SLO and latest errors) in, renderables out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rich import box
from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from loadgen import measures
from loadgen.analysis.diagnosis import diagnosis_line
from loadgen.analysis.quality import agreement_text, below_one, quality_line
from loadgen.analysis.ttft_split import split_line
from loadgen.format import fmt_count, fmt_gauge, fmt_gib, fmt_ms, fmt_pct, fmt_rate, fmt_seconds, fmt_si
from loadgen.metrics.slices import figure_name
from loadgen.snapshot import METRICS, SLO, Percentiles, StepSummary
from tui.format import error_label, metric_title, mode_label, slo_clause
from tui.margins import margin_of, untrusted_lines


@dataclass(frozen=True, slots=True)
class Look:
    """The report's styles (the detail screen takes them from its component classes in ramp.tcss)."""

    heading: Style = field(default_factory=lambda: Style(bold=True))
    good: Style = field(default_factory=Style.null)
    bad: Style = field(default_factory=lambda: Style(bold=True))
    warn: Style = field(default_factory=Style.null)
    dim: Style = field(default_factory=lambda: Style(dim=True))


PLAIN = Look()
QUANTILES = ("mean", "p50", "p90", "p95", "p99", "p999", "max")
QUANTILE_TITLES = {"p999": "p99.9"}


@dataclass(frozen=True, slots=True)
class Clause:
    """One SLO objective as the verdict names it, its limit as written, and the step's figure."""

    name: str  # as slo.evaluate names it in a failure line ("TTFT p95")
    limit: str  # "≤ 500 ms"
    value: str


def _shown(unit: str, value: float | None) -> str:
    return fmt_ms(value) if unit == "ms" else f"{fmt_si(value)} {unit}"


def slo_clauses(slo: SLO, step: StepSummary) -> list[Clause]:
    """Each set clause of ``slo`` (``loadgen.measures.CLAUSES``, in order): its limit and the step's figure,
    in the metric's display unit; n/a for a clause over a subset the step has none of (TTFTC, no tool call)."""
    stats = step.stats
    limits = slo.as_dict()
    clauses = []
    for clause in measures.CLAUSES:
        limit = limits[clause.key]
        if limit is None:
            continue
        if clause.step_figure:  # answer agreement (--quality): the step's probes
            clauses.append(Clause(clause.label, f"≥ {limit:.2f}", agreement_text(step.quality)))
            continue
        if not clause.metric:
            clauses.append(Clause(clause.label, f"≤ {fmt_pct(limit)}", fmt_pct(error_rate(step))))
            continue
        unit = METRICS.get(clause.metric, "")
        pct = stats.pct(clause.metric)
        value = _shown(unit, pct.as_dict()[clause.point]) if pct.count or not clause.subset else "n/a"
        if value != "n/a":  # the figure's 95 % interval, where the step has one: "412 ms ±6 %"
            value += margin_of(step.margins, figure_name(clause.metric, clause.point))
        bound = "≤" if clause.at_most else "≥"
        clauses.append(Clause(clause.label, f"{bound} {_shown(unit, limit * clause.per)}", value))
    return clauses


def error_rate(step: StepSummary) -> float | None:
    done = step.stats.ok + step.stats.error_count
    return None if done == 0 else step.stats.error_count / done


def verdict_block(slo: SLO, step: StepSummary, look: Look) -> RenderableType:
    verdict = step.verdict
    head = Text("SLO  ", style=look.heading)
    if verdict.met is None:
        judged_none = verdict.failures or verdict.not_judged
        head.append("no verdict" if judged_none else "no SLO set", style=look.dim)
    elif verdict.three_valued == "undecided":  # an interval straddles a limit: neither met nor missed yet
        head.append("undecided", style=look.warn)
    else:
        head.append("met" if verdict.met else "missed", style=look.good if verdict.met else look.bad)
    failing = {slo_clause(f).lower() for f in verdict.failures}
    unjudged = {slo_clause(f).lower() for f in verdict.not_judged}
    straddling = {line.lower() for line in verdict.undecided}
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False)
    for clause in slo_clauses(slo, step):
        broken = clause.name.lower() in failing
        if verdict.met is None or clause.name.lower() in unjudged:
            mark = ("–", look.dim)  # nothing judged, or this clause had nothing to judge (n/a)
        elif any(line.startswith(f"{clause.name.lower()} ") for line in straddling):
            mark = ("?", look.warn)  # its interval straddles the limit
        else:
            mark = ("✕", look.bad) if broken else ("✓", look.good)
        table.add_row(Text(f"  {clause.name} {clause.limit}"), Text(clause.value), Text(*mark))
    parts: list[RenderableType] = [head, table] if table.row_count else [head]
    parts += [
        Text(f"  {failure}", style=look.bad if verdict.met is False else look.dim)
        for failure in verdict.failures
    ]
    parts += [Text(f"  {line}", style=look.dim) for line in verdict.not_judged]
    parts += [Text(f"  undecided: {line}", style=look.warn) for line in verdict.undecided]
    return Group(*parts)


def grid(look: Look) -> Table:
    """Two columns, a label and a value that wraps under itself."""
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False, expand=True)
    table.add_column(style=look.heading, no_wrap=True)
    table.add_column(ratio=1)
    return table


def standing_block(step: StepSummary, look: Look) -> RenderableType:
    """Whether the client limited the step, whether its requests ran into another load, how it was held."""
    table = grid(look)
    if step.client_bound:
        reason = step.bound_reason or "the load generator could not keep up"
        table.add_row("client", Text.assemble(("⚠ client-bound: ", look.bad), reason))
    else:
        table.add_row(
            "client", Text("not bound (the engine's health rule held over the step)", style=look.good)
        )
    if step.diagnosis:
        table.add_row("limit", Text(diagnosis_line(step.diagnosis).removeprefix("Limit: ")))
    if step.ttft_split:
        table.add_row("TTFT split", split_line(step.ttft_split))
    if step.quality:  # answer probes (--quality): agreement with its interval, prefix, tasks, failures
        changed = below_one(step.quality)
        table.add_row("answers", Text(quality_line(step.quality), style=look.bad if changed else ""))
    if step.carried_share > 0:
        # read again on its requests done before the key (loadgen.run.censor): the same verdict or not
        kept = "its requests done before the key read the same verdict: it may be the best step"
        cut = (
            f"cut: {fmt_pct(step.carried_share, 0)} of its counted requests were carried into the next load "
            f"(a manual change); {kept if step.clean else 'never a best step'}"
        )
        table.add_row("load", Text(cut, style=look.warn))
    else:
        table.add_row(
            "load", Text("clean: every counted request finished under this step's own load", style=look.good)
        )
    table.add_row(
        "timing",
        f"warm-up {fmt_seconds(step.warmup_s)} · window {fmt_seconds(step.window_s)} · closing "
        f"{fmt_seconds(step.closing_s)} (load held until its requests were done) · step "
        f"{fmt_seconds(step.duration_s)} · ended by {step.ended_by}",
    )
    stats = step.stats
    approx = f" · ~{fmt_count(stats.approx_tokens)} approx" if stats.approx_tokens else ""
    table.add_row(
        "requests",
        f"ok {fmt_count(stats.ok)} · errors {fmt_count(stats.error_count)} · cancelled "
        f"{fmt_count(stats.cancelled)} · {fmt_rate(stats.req_s)}",
    )
    table.add_row(
        "tokens",
        f"input {fmt_count(stats.input_tokens)} · output {fmt_count(stats.output_tokens)} · cached "
        f"{fmt_count(stats.cached_tokens)}{approx}",
    )
    out = f"out {fmt_si(stats.out_tok_s)} tok/s{margin_of(step.margins, 'out_tok_s')}"
    table.add_row("rates", f"{out} · prefill {fmt_si(stats.prefill_tok_s)} tok/s")
    return table


def percentile_cells(pct: Percentiles, unit: str) -> list[str]:
    values = pct.as_dict()
    fmt = fmt_ms if unit == "ms" else fmt_si
    return [fmt_count(pct.count), *(fmt(values[q]) for q in QUANTILES)]


def percentile_table(columns: list[tuple[str, Percentiles, str]]) -> Table:
    """One column per metric (title, percentiles, unit), one row per quantile: five metrics fit 80 columns
    where eight quantiles side by side would not."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    table.add_column("", no_wrap=True)
    for title, _, _ in columns:
        table.add_column(title, justify="right", no_wrap=True)
    cells = [percentile_cells(pct, unit) for _, pct, unit in columns]
    for row, name in enumerate(("n", *(QUANTILE_TITLES.get(q, q) for q in QUANTILES))):
        table.add_row(name, *(column[row] for column in cells))
    return table


def percentiles_block(step: StepSummary, look: Look) -> RenderableType:
    """Every percentile of each metric; the per-class ones (cache hit / miss...) in a table of their own."""
    stats = step.stats
    shown = [(metric_title(m), stats.pct(m), unit) for m, unit in METRICS.items() if stats.pct(m).count]
    parts: list[RenderableType] = [percentile_table(shown)] if shown else [Text("no samples", style=look.dim)]
    by_class = [
        (f"{metric_title(metric)} {cls}", pct, METRICS.get(metric, ""))
        for cls, metrics in stats.by_class.items()
        for metric, pct in metrics.items()
    ]
    if by_class:
        parts += [Text("\nby request class", style=look.heading), percentile_table(by_class)]
    if stats.out_of_range:
        outside = ", ".join(f"{metric_title(m)} {fmt_count(n)}" for m, n in stats.out_of_range.items())
        parts.append(Text(f"out of histogram range (not in the percentiles): {outside}", style=look.warn))
    return Group(*parts)


def margins_block(step: StepSummary, look: Look) -> RenderableType | None:
    """Each step-line percentile's and rate's 95 % margin ('TTFT  p50 ±2 % · p95 ±6 % · p99 ±15 %?'), and
    why the intervals marked ? are not trusted; None for a step recorded without margins."""
    if not step.margins:
        return None
    table = grid(look)
    for metric in measures.line_metrics():
        cells = [
            f"{point}{margin_of(step.margins, figure_name(metric.name, point))}"
            for point in metric.step_points
            if figure_name(metric.name, point) in step.margins
        ]
        cells = [cell for cell in cells if "±" in cell]
        if cells:
            table.add_row(f"  {metric_title(metric.name)}", " · ".join(cells))
    rates = [
        f"{title}{margin_of(step.margins, name)}"
        for name, title in (("out_tok_s", "out tok/s"), ("req_s", "req/s"))
    ]
    if any("±" in rate for rate in rates):
        table.add_row("  rates", " · ".join(rate for rate in rates if "±" in rate))
    parts: list[RenderableType] = [Text("margins of error (95 % intervals, batch means)", style=look.heading)]
    parts.append(table)
    parts += [Text(f"  ? {line}", style=look.dim) for line in untrusted_lines(step.margins)]
    return Group(*parts)


def errors_block(step: StepSummary, latest_errors: Mapping[str, str], look: Look) -> RenderableType:
    """Counts by kind, each with the step's own latest message (its record line keeps it), or the run's
    latest of that kind, said so, for a step recorded without one."""
    errors = step.stats.errors
    if not errors:
        return Text.assemble(("errors  ", look.heading), ("none", look.good))
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False, expand=True)
    table.add_column(no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    for kind, count in sorted(errors.items(), key=lambda item: -item[1]):
        own = step.latest_errors.get(kind)
        latest = own or (f"(the run's latest) {latest_errors[kind]}" if kind in latest_errors else "")
        table.add_row(Text(f"  {error_label(kind)}"), Text(fmt_count(count), style=look.bad), Text(latest))
    note = Text("errors by kind, with the latest message of each", style=look.heading)
    return Group(note, table)


def server_value(key: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if key.endswith("_ms"):
        return fmt_ms(value)
    if key.endswith("_mib"):
        return f"{fmt_gib(value)} GiB"
    if key.startswith("kv_usage") or key in ("prefix_cache_hit_rate", "spec_acceptance"):
        return fmt_pct(value)
    if key.endswith("tok_s"):
        return f"{fmt_si(value)} tok/s"
    if key.endswith("_w"):
        return f"{fmt_gauge(value)} W"
    if key.endswith("_s"):
        return fmt_seconds(value)
    if key == "gpu_util_mean":
        return f"{fmt_gauge(value)}%"
    return fmt_gauge(value)


def server_block(step: StepSummary, look: Look) -> RenderableType:
    if not step.server:
        return Text.assemble(("server  ", look.heading), ("no telemetry over this step", look.dim))
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), pad_edge=False)
    for key, value in step.server.items():
        table.add_row(Text(f"  {key.replace('_', ' ')}"), Text(server_value(key, value)))
    return Group(Text("server over the step's window", style=look.heading), table)


def step_report(
    step: StepSummary, slo: SLO, latest_errors: Mapping[str, str], *, best: bool, look: Look = PLAIN
) -> RenderableType:
    title = Text(f"step {step.index + 1}", style=look.heading)
    title.append(f"  ·  {mode_label(step.mode, step.level, step.rate_rps, step.arrival)}")
    if best:
        title.append("  ·  ★ best under the SLO", style=look.good)
    parts: list[RenderableType] = [
        title,
        verdict_block(slo, step, look),
        standing_block(step, look),
        percentiles_block(step, look),
        *([] if (margins := margins_block(step, look)) is None else [margins]),
        errors_block(step, latest_errors, look),
        server_block(step, look),
    ]
    if step.marks:
        parts.append(Group(Text("marks", style=look.heading), *(Text(f"  ⚑ {mark}") for mark in step.marks)))
    spaced: list[RenderableType] = []
    for part in parts:
        spaced += [part, Text("")]
    return Group(*spaced[:-1])
