"""Plain-text reporting: the step table (headless runs, ``ramp report FILE``) and a record's conditions.

Pure functions of StepSummary objects and record lines; no rich, no textual. Numbers are written by
``loadgen.format`` in its wide look (thousands separators, no SI suffix: the table's columns have room
and rows are compared digit by digit); ``n/a`` for a missing value. When the run's pricing is known the
table carries each step's cost (per 1M output tokens and per request, or per session for a multi-turn
profile: ``loadgen.analysis.cost``); a level run more than once gets a line in the repeats table, each
figure as "median (min–max)" over its clean steps. ``ramp report FILE`` adds each step's limit and TTFT
split below its table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadgen import measures
from loadgen.analysis.cost import StepCost, describe_pricing, pricing_of
from loadgen.analysis.diagnosis import limit_lines
from loadgen.analysis.figures import REPEAT_FIGURES
from loadgen.analysis.quality import agreement_text, tasks_text
from loadgen.analysis.runs import levels_of, spread
from loadgen.format import (
    NA,
    fmt_count,
    fmt_gauge,
    fmt_num_wide,
    fmt_pct,
    fmt_range,
    fmt_seconds,
    fmt_setting,
    fmt_usd,
)
from loadgen.snapshot import StepSummary

if TYPE_CHECKING:
    from loadgen.analysis.reports import ReportRun

__all__ = [
    "error_kinds",
    "format_repeats",
    "format_step_table",
    "header_lines",
    "repeat_rows",
    "table_cells",
    "text_report",
    "verdict_lines",
]


def _load(step: StepSummary) -> str:
    if step.mode == "open":
        rate = f"{fmt_setting(step.rate_rps)}/s" if step.rate_rps is not None else NA
        return f"{rate} ≤{step.level}" if step.level else rate
    return str(step.level)


def _load_words(step: StepSummary) -> str:
    if step.mode == "open" and step.rate_rps is not None:
        return f"{fmt_setting(step.rate_rps)} req/s"
    return f"{step.level} stream{'s' if step.level != 1 else ''}"


def _slo_mark(step: StepSummary) -> str:
    """✓ met, ✗ missed, ? undecided (an interval straddles a limit: neither), – not judged."""
    if step.verdict.three_valued == "undecided":
        return "?"
    met = step.verdict.met
    return "✓" if met is True else "✗" if met is False else "–"


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    unit: str
    keep: int  # columns with the lowest value go first when the table is too wide
    cell: Callable[[StepSummary], str]
    left: bool = False


def _estimated(step: StepSummary) -> str:
    """``~`` before a count that is not all the server's own (requests without usage were counted)."""
    return "~" if step.stats.approx_tokens and step.stats.out_tok_s is not None else ""


def _e2e_s(step: StepSummary) -> str:
    ms = step.stats.pct(measures.E2E_MS).p95
    return NA if ms is None else fmt_num_wide(ms / 1000)


_COLUMNS: tuple[_Column, ...] = (
    _Column("step", "", 100, lambda s: str(s.index + 1)),
    _Column("level", "", 99, _load),
    _Column("ok", "", 90, lambda s: fmt_count(s.stats.ok)),
    _Column("err", "", 88, lambda s: fmt_count(s.stats.error_count)),
    _Column("out", "tok/s", 98, lambda s: _estimated(s) + fmt_num_wide(s.stats.out_tok_s)),
    _Column("prefill", "tok/s", 40, lambda s: fmt_num_wide(s.stats.prefill_tok_s)),
    _Column("decode p50", "tok/s", 70, lambda s: fmt_num_wide(s.stats.pct(measures.DECODE_TOK_S).p50)),
    _Column("TTFT p50", "ms", 50, lambda s: fmt_num_wide(s.stats.pct(measures.TTFT_MS).p50)),
    _Column("TTFT p95", "ms", 95, lambda s: fmt_num_wide(s.stats.pct(measures.TTFT_MS).p95)),
    _Column("TTFT p99", "ms", 60, lambda s: fmt_num_wide(s.stats.pct(measures.TTFT_MS).p99)),
    _Column("e2e p95", "s", 45, _e2e_s),
    _Column("SLO", "", 97, _slo_mark),
)


def _server(
    key: str, scale: float = 1.0, fmt: Callable[[float], str] = fmt_num_wide
) -> Callable[[StepSummary], str]:
    def cell(step: StepSummary) -> str:
        value = step.server.get(key) if step.server else None
        return NA if value is None else fmt(float(value) * scale)

    return cell


# Telemetry columns: shown only when some step has the value (the server exposed it), dropped first when
# the table is too wide.
_SERVER_COLUMNS: tuple[tuple[str, _Column], ...] = (
    ("kv_usage_max", _Column("KV max", "%", 36, _server("kv_usage_max", 100.0))),
    ("waiting_max", _Column("wait max", "", 35, _server("waiting_max", fmt=fmt_gauge))),
    ("preemptions", _Column("preempt", "", 30, _server("preemptions"))),
    ("prefix_cache_hit_rate", _Column("pfx hit", "%", 25, _server("prefix_cache_hit_rate", 100.0))),
    ("gpu_mem_used_max_mib", _Column("GPU mem", "GiB", 33, _server("gpu_mem_used_max_mib", 1 / 1024))),
    ("server_ttft_p50_ms", _Column("srv TTFT p50", "ms", 34, _server("server_ttft_p50_ms"))),
)
# Reasoning models: shown only when some step's requests reasoned (TTFAT would repeat TTFT otherwise).
_REASONING_COLUMNS = (
    _Column("TTFAT p95", "ms", 62, lambda s: fmt_num_wide(s.stats.pct(measures.TTFAT_MS).p95)),
    _Column("reason p50", "ms", 32, lambda s: fmt_num_wide(s.stats.pct(measures.REASONING_MS).p50)),
)
# Tool calls: shown only when some step's requests called a tool.
_TOOL_COLUMNS = (
    _Column("TTFTC p95", "ms", 61, lambda s: fmt_num_wide(s.stats.pct(measures.TTFTC_MS).p95)),
    _Column("calls", "", 31, lambda s: fmt_count(s.stats.tool_calls)),
)
# Answer probes (--quality): each step's agreement with the reference, with its 95 % interval, and with
# verifiable tasks the share passed; shown only when some step has probes (tasks)
_QUALITY_COLUMN = _Column("agree", "", 87, lambda s: agreement_text(s.quality) if s.quality else "")
_TASKS_COLUMN = _Column("tasks ok", "", 86, lambda s: tasks_text(s.quality).split(" of ")[0])
_BOUND_COLUMN = _Column("", "", 80, lambda s: "!" if s.client_bound else "")
# A step a key cut: the share of its counted requests that finished under the next load (the console's
# "cut N%"); the best step only where its requests done before the key read the same verdict
_CUT_COLUMN = _Column("cut", "", 79, lambda s: fmt_pct(s.carried_share, 0) if s.carried_share > 0 else "")
_GAP = "  "


def _no_slo(steps: Sequence[StepSummary]) -> bool:
    return all(s.verdict.met is None and not s.verdict.failures and not s.verdict.not_judged for s in steps)


def _cost_columns(costs: Mapping[int, StepCost], task: str) -> list[_Column]:
    """Cost per 1M output tokens and per task, on each basis the pricing has (GPU hours, token prices)."""

    def cell(basis: str, per_task: bool) -> Callable[[StepSummary], str]:
        def text(step: StepSummary) -> str:
            cost = costs.get(step.index)
            figures = None if cost is None else (cost.gpu if basis == "GPU" else cost.tokens)
            if figures is None:
                return NA
            return fmt_usd(figures.per_task if per_task else figures.per_1m_output)

        return text

    columns = []
    for basis, keep in (("GPU", 85), ("API", 84)):
        if any((c.gpu if basis == "GPU" else c.tokens) is not None for c in costs.values()):
            columns.append(_Column(f"{basis} $/1M", "out tok", keep, cell(basis, False)))
            columns.append(_Column(f"{basis} $/{task}", "", keep - 30, cell(basis, True)))
    return columns


def _columns(steps: Sequence[StepSummary], extra: Sequence[_Column] = ()) -> list[_Column]:
    """The fixed columns, the telemetry ones some step has, ``extra`` and the answer probes' (before SLO),
    the client-bound mark if any."""
    columns = list(_COLUMNS)
    if any(s.stats.reasoned for s in steps):
        at = next(i for i, c in enumerate(columns) if c.name == "TTFT p99") + 1
        columns[at:at] = _REASONING_COLUMNS
    if any(s.stats.tool_calls for s in steps):
        at = next(i for i, c in enumerate(columns) if c.name == "TTFT p99") + 1
        columns[at:at] = _TOOL_COLUMNS
    slo_at = len(columns) - 1
    server = [
        column
        for key, column in _SERVER_COLUMNS
        if any(s.server and s.server.get(key) is not None for s in steps)
    ]
    probed = [_QUALITY_COLUMN] if any(s.quality for s in steps) else []
    probed += [_TASKS_COLUMN] if any(tasks_text(s.quality) for s in steps) else []
    columns[slo_at:slo_at] = [*server, *extra, *probed]
    if any(s.carried_share > 0 for s in steps):
        columns.append(_CUT_COLUMN)
    if any(s.client_bound for s in steps):
        columns.append(_BOUND_COLUMN)
    return columns


def _table(columns: list[_Column], rows: list[list[str]], width: int) -> list[str]:
    """Header, unit line and rows, aligned; columns that do not fit ``width`` dropped, least important first."""

    def widths(cols: list[int]) -> list[int]:
        return [max(len(columns[c].name), len(columns[c].unit), *(len(row[c]) for row in rows)) for c in cols]

    shown = list(range(len(columns)))
    while len(shown) > 3:
        total = sum(widths(shown)) + len(_GAP) * (len(shown) - 1)
        if total <= width:
            break
        shown.remove(min(shown, key=lambda c: columns[c].keep))
    col_w = widths(shown)

    def line(parts: list[str]) -> str:
        out = []
        for c, w, text in zip(shown, col_w, parts, strict=True):
            out.append(text.ljust(w) if columns[c].left or c == 0 else text.rjust(w))
        return _GAP.join(out).rstrip()

    lines = [line([columns[c].name for c in shown])]
    if any(columns[c].unit for c in shown):
        lines.append(line([columns[c].unit for c in shown]))
    lines.extend(line([row[c] for c in shown]) for row in rows)
    return lines


def error_kinds(errors: Mapping[str, int], most: int = 2) -> str:
    """``http_429 12, stream_cut 2``: the kinds counted, the most frequent first (``most`` of them, then +N)."""
    kinds = sorted(((n, k) for k, n in errors.items() if n), reverse=True)
    shown = ", ".join(f"{k} {fmt_count(n)}" for n, k in kinds[:most])
    return shown + (f", +{len(kinds) - most} more" if len(kinds) > most else "")


def _error_lines(steps: Sequence[StepSummary]) -> list[str]:
    """Each step that had errors: which kinds, and what the server said (a refusal named as such)."""
    from loadgen.target.refusals import refusal_text

    lines = []
    for step in steps:
        if step.stats.error_count:
            said = refusal_text(step.latest_errors)
            most = max(step.stats.errors, key=lambda kind: step.stats.errors[kind])
            latest = step.latest_errors.get(most, "") if said is None else ""
            said = said or (f'latest: "{latest[:80]}"' if latest else "")
            lines.append(
                f"  step {step.index + 1} errors: {error_kinds(step.stats.errors, 4)}"
                + (f" — {said}" if said else "")
            )
    return lines


FLAG_WORDS = {
    "worker_lost": "a load worker died during it: its load was not held",
    "closing_cut": "the run stopped while it closed: its requests still in flight were cancelled, not counted",
}


def flag_lines(steps: Sequence[StepSummary]) -> list[str]:
    """Each flagged step (``StepSummary.flags``) in words, and each whose goodput reads above its out tok/s."""
    lines = []
    for step in steps:
        for flag in step.flags:
            lost = f" ({step.lost_requests} in flight on it vanished)" if flag == "worker_lost" else ""
            lines.append(f"  step {step.index + 1} not clean: {FLAG_WORDS[flag]}{lost}")
        good, out = step.stats.goodput_tok_s, step.stats.out_tok_s
        if good is not None and out is not None and good > out:
            lines.append(
                f"  step {step.index + 1}: goodput {fmt_num_wide(good)} tok/s reads above out "
                f"{fmt_num_wide(out)} tok/s: goodput counts every token of the requests sent in the window "
                "(some arrived after it), out tok/s the tokens that arrived in it"
            )
    return lines


def _cut_lines(steps: Sequence[StepSummary]) -> list[str]:
    """The steps a key cut: the share of their requests that finished under the next load, and whether the
    reading on the requests done before the key (``before_key``) kept their verdict (``loadgen.run.censor``)."""
    lines = []
    said = (
        (True, "the same verdict: it may be the best step"),
        (False, "another verdict (or none): never a best step"),
    )
    for kept, words in said:
        cut = [s for s in steps if s.carried_share > 0 and (s.before_key.get("agrees") is True) == kept]
        if cut:
            which = ", ".join(f"step {s.index + 1} ({fmt_pct(s.carried_share, 0)})" for s in cut)
            lines.append(
                f"  cut by a key: {which} of the step's requests finished under the next load; the "
                f"requests done before the key read {words}"
            )
    return lines


def verdict_lines(steps: Sequence[StepSummary], best: int | None) -> list[str]:
    """The best step and why, each step's SLO failures, and which steps were client-bound (and by what)."""
    lines = []
    label = "best (no SLO set)" if _no_slo(steps) else "best under SLO"
    if best is None or not 0 <= best < len(steps):
        # Met, but not a clean step: cut by a key (its requests ran into the next load) or stopped part-way.
        unclean = [s for s in steps if s.verdict.met and (not s.clean or s.ended_by == "stop")]
        if unclean:
            which = ", ".join(str(s.index + 1) for s in unclean)
            lines.append(
                f"{label}: none among clean steps (step {which} met it, but was cut by a key or stopped "
                "part-way, so it is not measured under its own load)"
            )
        elif undecided := [s for s in steps if s.verdict.three_valued == "undecided"]:
            which = ", ".join(str(s.index + 1) for s in undecided)
            lines.append(
                f"{label}: none (step {which} undecided: its interval cannot tell a limit met from missed)"
            )
        else:
            lines.append(f"{label}: none (no step met the SLO)")
    else:
        step = steps[best]
        lines.append(
            f"{label}: step {step.index + 1}, {_load_words(step)}, {fmt_num_wide(step.stats.out_tok_s)} out tok/s"
        )
    for step in steps:
        if step.verdict.failures or step.verdict.not_judged:
            said = (*step.verdict.failures, *step.verdict.not_judged)
            lines.append(f"  step {step.index + 1} {_slo_mark(step)} " + "; ".join(said))
        if step.verdict.undecided:  # not met, not missed: how far, and about how much longer would decide it
            lines.append(f"  step {step.index + 1} ? undecided: " + "; ".join(step.verdict.undecided))
    lines.extend(_error_lines(steps))
    lines.extend(flag_lines(steps))
    if any(_estimated(s) for s in steps):
        lines.append(
            "  ~ output tokens estimated from the stream: the server sent no usage for some requests"
        )
    lines.extend(_cut_lines(steps))
    if any(s.client_bound for s in steps):
        lines.append("  ! client-bound: the load generator, not the server, may have limited these steps")
        for step in steps:
            if step.client_bound and step.bound_reason:
                lines.append(f"    step {step.index + 1}: {step.bound_reason}")
    return lines


def format_step_table(
    steps: Sequence[StepSummary],
    best: int | None,
    width: int = 120,
    costs: Mapping[int, StepCost] | None = None,
    task: str = "req",
) -> str:
    """The step table, best step starred, then a line naming the best step and why steps missed the SLO.

    ``costs`` (by step index) adds cost columns, ``task`` naming what one task is ("req", "session").
    Columns that do not fit ``width`` are dropped, least important first (readable at 80 columns).
    """
    if not steps:
        return "no finished step"
    columns = _columns(steps, _cost_columns(costs or {}, task))
    rows: list[list[str]] = []
    for at, step in enumerate(steps):
        cells = [col.cell(step) for col in columns]
        cells[0] += "*" if at == best else " "
        rows.append(cells)
    return "\n".join([*_table(columns, rows, width), "", *verdict_lines(steps, best)])


def table_cells(
    steps: Sequence[StepSummary],
    best: int | None,
    costs: Mapping[int, StepCost] | None = None,
    task: str = "req",
) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """The step table as (name, unit) per column and its rows' cells, best starred, no column dropped:
    the same table for Markdown and HTML."""
    columns = _columns(steps, _cost_columns(costs or {}, task))
    rows = []
    for at, step in enumerate(steps):
        cells = [col.cell(step) for col in columns]
        cells[0] += "*" if at == best else ""
        rows.append(cells)
    return [(col.name, col.unit) for col in columns], rows


# The repeats table: columns dropped when too wide in this order (the step table's own priorities).
_REPEAT_KEEP = {"out_tok_s": 98, "ttft_p95_ms": 95, "error_rate": 88, "decode_p50_tok_s": 70}


def repeat_rows(steps: Sequence[StepSummary]) -> tuple[list[str], list[list[str]]]:
    """The repeats table's column names and rows (levels with several clean steps); no rows without any."""
    names = ["level", "n", *(f.label for f in REPEAT_FIGURES)]
    rows = []
    for level in levels_of(steps).values():
        if level.repeats <= 1:
            continue
        cells = [level.key.label, f"×{level.repeats}"]
        for figure in REPEAT_FIGURES:
            found = spread(figure.value(steps[at], {}, None) for at in level.at)
            look = figure.look
            cells.append(NA if found is None else fmt_range(found.median, found.low, found.high, look))
        rows.append(cells)
    return names, rows


def format_repeats(steps: Sequence[StepSummary], width: int = 120) -> str:
    """Levels with several clean steps, each figure as "median (min–max)"; "" when no level was repeated."""
    names, rows = repeat_rows(steps)
    if not rows:
        return ""
    keep = [100, 99, *(_REPEAT_KEEP.get(f.key, 50) for f in REPEAT_FIGURES)]
    columns = [
        _Column(name, "", k, lambda s: "", left=at == 0)
        for at, (name, k) in enumerate(zip(names, keep, strict=True))
    ]
    return "\n".join(
        ["repeats: median (min–max) over each level's clean steps", *_table(columns, rows, width)]
    )


def header_lines(header: Mapping[str, Any]) -> list[str]:
    def get(key: str) -> Any:
        value = header.get(key)
        return None if value in (None, "", {}, []) else value

    lines = []
    started = get("started_at") or NA
    lines.append(f"run      {started} on {get('host') or NA} · llm-ramp {get('ramp_version') or NA}")
    model = str(get("model") or NA)
    if get("model_revision"):
        model += f" (revision {get('model_revision')})"
    runtime = " ".join(str(x) for x in (get("runtime"), get("runtime_version")) if x) or "runtime n/a"
    lines.append(f"model    {model} · {runtime} · {get('target_url') or get('url') or NA}")
    profile = str(get("profile") or NA)
    if get("profile_hash"):
        profile += f" ({str(get('profile_hash'))[:12]})"
    mode = get("mode") or NA
    lines.append(
        f"profile  {profile} · {mode} loop · arrival {get('arrival') or NA} · {get('workers') or 1} worker(s)"
    )
    plan = get("plan")
    if isinstance(plan, Mapping):
        levels = ", ".join(fmt_setting(v) for v in plan.get("levels") or ())
        lines.append(
            f"plan     levels {levels or NA} · {plan.get('step_s', NA)} s steps, {plan.get('warmup_s', NA)} s warm-up"
        )
    slo = get("slo")
    if isinstance(slo, Mapping):
        set_ = {k: v for k, v in slo.items() if v is not None}
        if set_:
            lines.append(
                "slo      "
                + " ".join(
                    f"{k}={fmt_setting(v)}" if isinstance(v, float) else f"{k}={v}" for k, v in set_.items()
                )
            )
    tags = get("tags")
    if isinstance(tags, Mapping):
        lines.append("tags     " + " ".join(f"{k}={v}" for k, v in tags.items()))
    pricing = pricing_of(header)
    if pricing is not None:
        lines.append(f"pricing  {describe_pricing(pricing)}")
    return lines


def _end_lines(report: ReportRun) -> list[str]:
    """The operator's marks, how the run ended, and whether the file was cut short."""
    out = []
    if report.marks:
        out.append("")
        for mark in report.marks:
            at = mark.get("elapsed_s")
            when = fmt_seconds(at) if isinstance(at, int | float) else str(mark.get("at", ""))
            out.append(f"mark     {when}: {mark.get('note', '')}")
    end = report.end
    if end is not None:
        message = f" — {end['message']}" if end.get("message") else ""
        out.append(f"end      {end.get('state', NA)}{message}")
    else:
        out.append("end      no end line: the run was interrupted (finished steps are above)")
    if report.truncated:
        out.append("note     the last line was cut short (run killed mid-write) and was skipped")
    return out


def text_report(report: ReportRun, width: int = 120) -> str:
    """``ramp report FILE``: the run's conditions, its step table, repeats, marks and how it ended."""
    steps = report.run.steps
    out = header_lines(report.run.header)
    out.append("")
    out.append(format_step_table(steps, report.best, width=width, costs=report.costs, task=report.task))
    out += limit_lines(steps)
    repeats = format_repeats(steps, width=width)
    if repeats:
        out += ["", repeats]
    out += _end_lines(report)
    return "\n".join(out)
