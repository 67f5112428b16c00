"""A report's flat rows: one per step, every figure under a flat column name, and the run's conditions.

Owns the column set of ``ramp report --format csv`` (and the ``steps`` objects of ``--format json``): each
column's name, JSON type and meaning, declared once in ``STEP_COLUMNS`` and ``RUN_COLUMNS``. Names are
``snake_case`` with the unit last (``ttft_p95_ms``, ``decode_p50_tok_s``, ``cost_gpu_usd_per_1m_out``);
grouped ones share a prefix (``errors_<kind>``, ``server_<telemetry key>``, ``tag_<key>``,
``server_config_<key>``). A value that is not known is ``None`` (an empty CSV cell, JSON ``null``), never 0.
Values are the record's own, unrounded: rounding is for the faces that show them (``loadgen.format``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loadgen import measures
from loadgen.analysis.conditions import conditions_of, show
from loadgen.analysis.cost import Costs, StepCost
from loadgen.analysis.reports import ReportRun
from loadgen.runtimes import LAUNCHABLE
from loadgen.snapshot import StepSummary
from loadgen.telemetry.window import WINDOW_KEYS
from loadgen.types import ErrorKind

__all__ = [
    "RUN_COLUMNS",
    "STEP_COLUMNS",
    "Column",
    "JsonKind",
    "CONDITION_COLUMNS",
    "condition_values",
    "server_column",
    "step_rows",
    "table_rows",
]

JsonKind = Literal["string", "number", "integer", "boolean"]
Row = dict[str, object]


@dataclass(frozen=True, slots=True)
class StepInput:
    """What one step's columns read: the typed step, its raw line, its cost, whether it is the best."""

    step: StepSummary
    line: Mapping[str, object]
    cost: StepCost | None
    best: bool
    task: str


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: JsonKind
    doc: str
    value: Callable[[StepInput], object]
    nullable: bool = True


def _c(
    name: str, kind: JsonKind, doc: str, value: Callable[[StepInput], object], nullable: bool = True
) -> Column:
    return Column(name, kind, doc, value, nullable)


def _per_req(key: str, point: str) -> Callable[[StepInput], object]:
    def value(src: StepInput) -> object:
        found = src.line.get(key)
        return found.get(point) if isinstance(found, Mapping) else None

    return value


def _error_rate(src: StepInput) -> float | None:
    done = src.step.stats.ok + src.step.stats.error_count
    return None if done == 0 else src.step.stats.error_count / done


def _cost(basis: Literal["gpu", "api"], figure: str) -> Callable[[StepInput], object]:
    def value(src: StepInput) -> object:
        costs: Costs | None = None
        if src.cost is not None:
            costs = src.cost.gpu if basis == "gpu" else src.cost.tokens
        if costs is None:
            return None
        return {"usd": costs.usd, "per_1m_out": costs.per_1m_output, "per_task": costs.per_task}[figure]

    return value


def _pct(metric: str, point: str) -> Callable[[StepInput], object]:
    return lambda src: src.step.stats.pct(metric).as_dict()[point]


def _count(metric: str) -> Callable[[StepInput], object]:
    return lambda src: src.step.stats.pct(metric).count


def _errors_of(kind: str) -> Callable[[StepInput], object]:
    return lambda src: src.step.stats.errors.get(kind, 0)


def _metric_columns() -> list[Column]:
    """Each histogram's count and percentile columns (``<stem>_count``, ``<stem>_<point>_<unit>``), from the
    catalogue (``loadgen.measures``), in its order."""
    columns = []
    for metric in measures.histogram_metrics():
        name, stem, unit, doc = metric.name, metric.stem, metric.suffix, metric.doc
        columns.append(
            _c(f"{stem}_count", "integer", f"values in the {name} histogram ({doc})", _count(name), False)
        )
        columns.extend(
            _c(f"{stem}_{p}_{unit}", "number", f"{doc}: {p}", _pct(name, p)) for p in measures.POINTS
        )
    return columns


# The rates a step's margins carry (``loadgen.metrics.slices.RATES``), each with its interval's columns.
_MARGIN_RATES = ("out_tok_s", "req_s", "goodput_req_s", "goodput_tok_s")


def _bound(figure: str, end: Literal["lo", "hi"]) -> Callable[[StepInput], object]:
    def value(src: StepInput) -> object:
        iv = src.step.margins.get(figure)
        return None if iv is None else iv.lo if end == "lo" else iv.hi

    return value


def _untrusted(src: StepInput) -> str:
    return "; ".join(f"{name}: {iv.why}" for name, iv in src.step.margins.items() if not iv.trusted)


def _margin_columns() -> list[Column]:
    """The 95 % interval of each step-line percentile (``Metric.step_points``) and rate: ``<figure>_lo`` and
    ``<figure>_hi`` (``ttft_p95_ms_lo``, ``out_tok_s_hi``), then which were not trusted and why."""
    figures = [
        *_MARGIN_RATES,
        *(f"{m.stem}_{p}_{m.suffix}" for m in measures.line_metrics() for p in m.step_points if p != "mean"),
    ]
    columns = [
        _c(
            f"{f}_{end}",
            "number",
            f"{f}: {'lower' if end == 'lo' else 'upper'} end of its 95 % interval",
            _bound(f, end),
        )
        for f in figures
        for end in ("lo", "hi")
    ]
    columns.append(
        _c(
            "margins_untrusted",
            "string",
            "the intervals flagged untrusted and why, '; '-separated",
            _untrusted,
            False,
        )
    )
    return columns


def _per_req_columns() -> list[Column]:
    """Each per-request token count's step-line summary (``<name>_per_req_<point>``)."""
    return [
        _c(f"{m.name}_per_req_{p}", "number", f"{m.doc}: {p}", _per_req(f"{m.name}_per_req", p))
        for m in measures.token_metrics()
        for p in m.step_points
    ]


def server_column(key: str) -> str:
    """The column of a step telemetry key: ``server_<key>``, the key itself when it already starts so."""
    return key if key.startswith("server_") else f"server_{key}"


def _server(key: str) -> Column:
    def value(src: StepInput) -> object:
        return src.step.server.get(key) if src.step.server else None

    return _c(server_column(key), "number", f"the server's telemetry over the step: {key}", value)


def _split_mean(part: str) -> Callable[[StepInput], object]:
    def value(src: StepInput) -> object:
        found = src.step.ttft_split.get(part)
        return found.get("mean_ms") if isinstance(found, Mapping) else None

    return value


def _split_bucket(point: str, end: int) -> Callable[[StepInput], object]:
    def value(src: StepInput) -> object:
        found = src.step.ttft_split.get("server")
        bucket = found.get(f"{point}_bucket_ms") if isinstance(found, Mapping) else None
        return bucket[end] if isinstance(bucket, (list, tuple)) and len(bucket) == 2 else None

    return value


def _bucket_columns() -> list[Column]:
    """The bounds of the server's TTFT bucket its p50 and p95 fall in: those percentiles' resolution."""
    ends = {
        "lo": "its low bound, ms",
        "hi": "its high bound, ms (empty for the +Inf bucket, whose low bound is set)",
    }
    return [
        _c(
            f"ttft_server_{point}_bucket_{end}_ms",
            "number",
            f"the bucket of the server's TTFT histogram over the step that its {point} lies in (the {point}'s resolution): {doc}",
            _split_bucket(point, at),
        )
        for point in ("p50", "p95")
        for at, (end, doc) in enumerate(ends.items())
    ]


def _limit_columns() -> list[Column]:
    """The TTFT split's means (``loadgen.analysis.ttft_split``) and the limit's diagnosis
    (``loadgen.analysis.diagnosis``)."""
    parts = {
        "server": "the server's own mean TTFT (its /metrics histogram over the window), ms",
        "queue": "the server's mean queue time (waiting for a slot), ms",
        "prefill": "the server's mean prefill time (scheduled to first token), ms",
        "outside": "mean TTFT outside the server (client mean - server mean: network, proxy, HTTP, client), ms",
    }
    return [
        *(_c(f"ttft_{part}_mean_ms", "number", doc, _split_mean(part)) for part, doc in parts.items()),
        *_bucket_columns(),
        _c("diagnosis", "string", "the limiting mechanism: none, queueing, kv_cache, decode_bound, prefill_bound, client, network, errors, unknown", lambda s: s.step.diagnosis.get("kind")),
        _c("diagnosis_confidence", "string", "high, medium or low", lambda s: s.step.diagnosis.get("confidence")),
        _c("diagnosis_evidence", "string", "what the diagnosis read, '; '-separated", lambda s: "; ".join(map(str, _listed(s.step.diagnosis.get("evidence")))), False),
        _c("diagnosis_first_checks", "string", "what to check first, '; '-separated", lambda s: "; ".join(map(str, _listed(s.step.diagnosis.get("first_checks")))), False),
    ]  # fmt: skip


def _quality(key: str) -> Callable[[StepInput], object]:
    def value(src: StepInput) -> object:
        return src.step.quality.get(key) if src.step.quality else None

    return value


def _quality_columns() -> list[Column]:
    """The answer probes' agreement (``--quality``, ``loadgen.analysis.quality``) and the verifiable tasks'
    share passed (``--quality-tasks``): empty without them."""
    return [
        _c("quality_agree", "number", "share of the step's answer probes that matched their reference (--quality)", _quality("agree")),
        _c("quality_agree_lo", "number", "quality_agree's 95 % interval, low end", _quality("agree_lo")),
        _c("quality_agree_hi", "number", "quality_agree's 95 % interval, high end", _quality("agree_hi")),
        _c("quality_n", "integer", "answer probes compared in the step", _quality("n")),
        _c("quality_errors", "integer", "answer probes and tasks that failed (no answer), apart from the load's errors", _quality("errors")),
        _c("quality_tasks_ok", "number", "share of the step's verifiable tasks passed (--quality-tasks)", _quality("tasks_ok")),
        _c("quality_tasks_ok_lo", "number", "quality_tasks_ok's 95 % interval, low end", _quality("tasks_ok_lo")),
        _c("quality_tasks_ok_hi", "number", "quality_tasks_ok's 95 % interval, high end", _quality("tasks_ok_hi")),
        _c("quality_tasks_n", "integer", "verifiable tasks answered and checked in the step", _quality("tasks_n")),
    ]  # fmt: skip


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _step_columns(_metrics: object, _clauses: object) -> tuple[Column, ...]:
    return (
        _c("step", "integer", "step number, 1-based, in the order run", lambda s: s.step.index + 1, False),
        _c("repeat", "integer", "which repeat of its level (0-based, --repeat N)", lambda s: s.step.repeat, False),
        _c("mode", "string", "closed (fixed concurrency) or open (arrival rate)", lambda s: s.step.mode, False),
        _c("level", "integer", "concurrency (closed loop), or the concurrency cap (open, 0 = none)", lambda s: s.step.level, False),
        _c("rate_rps", "number", "arrival rate, req/s (open loop)", lambda s: s.step.rate_rps),
        _c("arrival", "string", "closed, constant, poisson or gamma(k)", lambda s: s.step.arrival, False),
        _c("warmup_s", "number", "warm-up before the measurement window, s", lambda s: s.step.warmup_s, False),
        _c("window_s", "number", "measurement window, s", lambda s: s.step.window_s, False),
        _c("duration_s", "number", "the whole step, s", lambda s: s.step.duration_s, False),
        _c("ended_by", "string", "what ended the step: plan, key, slo, stop ...", lambda s: s.step.ended_by, False),
        _c("clean", "boolean", "measured under its own load (or cut by a key, its requests done before it reading the same verdict)", lambda s: s.step.clean, False),
        _c("carried_share", "number", "share of its requests that finished under the next load", lambda s: s.step.carried_share, False),
        _c("closing_s", "number", "from the window's end until its last counted request was done, s", lambda s: s.step.closing_s, False),
        _c("cache", "string", "prefix cache before the step: reset, kept, or empty (unknown)", lambda s: s.step.cache, False),
        _c("best", "boolean", "the best step under the SLO (highest out tok/s among clean steps that met it)", lambda s: s.best, False),
        _c("ok", "integer", "requests finished without error in the window", lambda s: s.step.stats.ok, False),
        _c("errors", "integer", "requests that failed in the window (all kinds)", lambda s: s.step.stats.error_count, False),
        _c("error_rate", "number", "errors / (ok + errors)", _error_rate),
        _c("cancelled", "integer", "requests cancelled by ramp (not errors)", lambda s: s.step.stats.cancelled, False),
        *(
            _c(f"errors_{kind.value}", "integer", f"errors of kind {kind.value}", _errors_of(kind.value), False)
            for kind in ErrorKind
        ),
        _c("input_tokens", "integer", "prompt tokens of the window's successful requests", lambda s: s.step.stats.input_tokens, False),
        _c("output_tokens", "integer", "output tokens of the window's successful requests", lambda s: s.step.stats.output_tokens, False),
        _c("cached_tokens", "integer", "prompt tokens the server reported as cached", lambda s: s.step.stats.cached_tokens, False),
        _c("approx_tokens", "integer", "requests whose tokens were counted from the stream (no usage)", lambda s: s.step.stats.approx_tokens, False),
        *_per_req_columns(),
        _c("reasoned", "integer", "successful requests that reasoned before answering", lambda s: s.step.stats.reasoned, False),
        _c("reasoning_tokens", "integer", "their reasoning tokens (usage's, else counted)", lambda s: s.step.stats.reasoning_tokens, False),
        _c("tool_calls", "integer", "successful requests that called a tool", lambda s: s.step.stats.tool_calls, False),
        _c("tool_tokens", "integer", "their tool-call arguments' tokens", lambda s: s.step.stats.tool_tokens, False),
        _c("out_tok_s", "number", "aggregate output tokens/s over the window", lambda s: s.step.stats.out_tok_s),
        _c("prefill_tok_s", "number", "aggregate prompt tokens/s over the window", lambda s: s.step.stats.prefill_tok_s),
        _c("req_s", "number", "finished requests/s", lambda s: s.step.stats.req_s),
        _c("goodput_req_s", "number", "requests/s that met the SLO's per-request limits", lambda s: s.step.stats.goodput_req_s),
        _c("goodput_tok_s", "number", "their output tokens/s", lambda s: s.step.stats.goodput_tok_s),
        *_metric_columns(),
        *_margin_columns(),
        _c("slo_met", "boolean", "the step met the SLO (empty: no SLO or too little data)", lambda s: s.step.verdict.met),
        _c("slo_verdict", "string", "met, missed or undecided on the intervals (empty: not judged on them)", lambda s: s.step.verdict.three_valued),
        _c("slo_undecided", "string", "the SLO clauses whose interval straddles the limit, '; '-separated", lambda s: "; ".join(s.step.verdict.undecided), False),
        _c("slo_failures", "string", "the SLO clauses it missed, '; '-separated", lambda s: "; ".join(s.step.verdict.failures), False),
        _c("slo_not_judged", "string", "the SLO clauses with nothing to judge (TTFTC without a tool call), '; '-separated", lambda s: "; ".join(s.step.verdict.not_judged), False),
        _c("client_bound", "boolean", "the load generator may have limited the step", lambda s: s.step.client_bound, False),
        _c("client_bound_reason", "string", "why it was flagged client-bound", lambda s: s.step.bound_reason, False),
        *(_server(key) for key in WINDOW_KEYS),
        *_limit_columns(),
        *_quality_columns(),
        _c("cost_gpu_usd", "number", "GPU-hour cost of the window, USD", _cost("gpu", "usd")),
        _c("cost_gpu_usd_per_1m_out", "number", "GPU-hour cost per 1M output tokens, USD", _cost("gpu", "per_1m_out")),
        _c("cost_gpu_usd_per_task", "number", "GPU-hour cost per task (cost_task), USD", _cost("gpu", "per_task")),
        _c("cost_api_usd", "number", "token-price bill of the window, USD", _cost("api", "usd")),
        _c("cost_api_usd_per_1m_out", "number", "token-price bill per 1M output tokens, USD", _cost("api", "per_1m_out")),
        _c("cost_api_usd_per_task", "number", "token-price bill per task, USD", _cost("api", "per_task")),
        _c("cost_task", "string", "what a task is: req, or session (multi-turn profile)", lambda s: s.task, False),
        _c("marks", "string", "the operator's marks during the step, '; '-separated", lambda s: "; ".join(s.step.marks), False),
    )  # fmt: skip


# Every step column, in order; the metrics' columns derived from the catalogue whenever it changes.
STEP_COLUMNS: measures.Live[Column] = measures.Live(_step_columns)
_KNOWN_SERVER = frozenset(WINDOW_KEYS)


def _extra_server_keys(reports: Sequence[ReportRun]) -> list[str]:
    """Telemetry keys some step has beyond ``WINDOW_KEYS`` (a newer ramp's), in the order first seen."""
    seen: dict[str, None] = {}
    for report in reports:
        for step in report.run.steps:
            for key in step.server or {}:
                if key not in _KNOWN_SERVER:
                    seen.setdefault(key, None)
    return list(seen)


def step_rows(report: ReportRun, extra_server: Sequence[str] = ()) -> list[Row]:
    """Each step of ``report`` as ``STEP_COLUMNS`` (plus ``extra_server`` telemetry keys), in order."""
    columns = [*STEP_COLUMNS, *(_server(key) for key in extra_server)]
    rows = []
    for at, step in enumerate(report.run.steps):
        src = StepInput(
            step, report.run.lines[at], report.costs.get(step.index), at == report.best, report.task
        )
        rows.append({column.name: column.value(src) for column in columns})
    return rows


# ---- the run's conditions (every row of a CSV repeats them) ---------------------------------------------

# conditions_of keys renamed for a flat table, or left out (None): the step columns carry them per step
_CONDITION_NAMES: dict[str, str | None] = {
    "mode": None,
    "arrival": None,
    "profile": None,  # its content: the name and hash below say which
    "client_bound": None,
    "levels": "plan_levels",
    "step_s": "plan_step_s",
    "warmup_s": "plan_warmup_s",
    "seed": "seed_policy",
}


def _header(key: str) -> Callable[[ReportRun], object]:
    return lambda report: report.run.header.get(key)


RUN_COLUMNS: tuple[tuple[str, str, Callable[[ReportRun], object]], ...] = (
    ("record", "the record file, as given", lambda r: r.run.path),
    ("started_at", "when the run started (its host's clock, ISO 8601)", _header("started_at")),
    ("host", "the host ramp ran on", _header("host")),
    ("ramp_version", "the llm-ramp version that wrote the record", _header("ramp_version")),
    ("target_url", "the server (credentials and query removed)", _header("target_url")),
    ("profile", "the workload profile's name", _header("profile")),
    ("profile_hash", "the profile content's sha256", _header("profile_hash")),
    ("seed", "the workload's random seed", _header("seed")),
)
# what conditions_of adds, in its order (each as ``ramp compare`` shows it)
CONDITION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "the served model"),
    ("model_revision", "its revision"),
    ("runtime", ", ".join(LAUNCHABLE) + " ..."),
    ("runtime_version", "the runtime's version"),
    ("gpu_model", "the GPU, from telemetry or --tag gpu"),
    ("gpu_count", "how many GPUs"),
    ("interconnect", "from --tag interconnect"),
    ("dtype", "the weights' precision"),
    ("quantization", "the quantization method"),
    ("kv_cache_dtype", "the KV cache's precision"),
    ("parallel", "tp=/pp=/dp=/ep= sizes"),
    ("speculative", "speculative decoding: algorithm, draft tokens, draft model"),
    ("prefix_caching", "on or off"),
    ("max_model_len", "the server's context length"),
    ("api", "chat or completions"),
    ("plan_levels", "the plan's levels, comma-separated"),
    ("plan_step_s", "the plan's step length, s"),
    ("plan_warmup_s", "the plan's warm-up, s"),
    ("cold_start", "cold (a launched server's first load) or warm"),
    ("cache_reset", "--reset-prefix-cache: never, step or run"),
    ("slo", "the SLO's clauses"),
    ("seed_policy", "fresh (drawn for the run) or given N"),
    ("workers", "load worker processes"),
    ("transport", "h1, aiohttp or httpx"),
    (
        "max_concurrency",
        "the open loop's --max-concurrency cap ('none', or the cap; 'closed loop' without an open-loop step)",
    ),
    ("fit_context", "--fit-context: on or off"),
)


def _as_cell(value: object) -> object:
    """A condition as one scalar: numbers and text kept, lists and tables as ``ramp compare`` shows them."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return show(value)


def condition_values(report: ReportRun) -> Row:
    """The run's columns: ``RUN_COLUMNS``, ``CONDITION_COLUMNS``, then ``tag_<key>`` and
    ``server_config_<key>`` for the tags and server settings this run has."""
    row: Row = {name: _as_cell(read(report)) for name, _doc, read in RUN_COLUMNS}
    for key, condition in conditions_of(report.run).items():
        if key.startswith("tag:"):
            continue  # every tag is below, as given
        if key.startswith("server:"):
            row[f"server_config_{key.removeprefix('server:')}"] = _as_cell(condition.value)
            continue
        name = _CONDITION_NAMES.get(key, key)
        if name is not None:
            row[name] = _as_cell(condition.value)
    tags = report.run.header.get("tags")
    for key, value in tags.items() if isinstance(tags, Mapping) else ():
        row[f"tag_{key}"] = _as_cell(value)
    return row


def table_rows(reports: Sequence[ReportRun]) -> tuple[list[str], list[Row]]:
    """Every step of every record as one flat row (the run's columns first): the field names, the rows."""
    extra = _extra_server_keys(reports)
    fields: dict[str, None] = {}
    rows = []
    for report in reports:
        conditions = condition_values(report)
        for step in step_rows(report, extra):
            row = {**conditions, **step}
            fields.update(dict.fromkeys(row))
            rows.append(row)
    if not rows:  # no step anywhere: the header alone
        fields.update(dict.fromkeys([name for name, _d, _r in RUN_COLUMNS] + [c.name for c in STEP_COLUMNS]))
    return list(fields), rows
