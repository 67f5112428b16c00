"""A finished record as the console draws it (``ramp replay RECORD``): its steps typed, the 1 Hz throughput
series and each step's start (``series`` and ``started_s`` in the step lines and the end event; an older
record has none, and says so), the marks, the warnings, how the run ended, the whole run's figures merged
from the steps' stored HDR histograms, and ``snapshot_at``: the ``Snapshot`` of the run looked at on one
step — the same object the engine publishes live, so every panel draws it unchanged.

Engine-free: reads the record, never a server. A bad record is an ``AnalysisError`` naming the file and line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from loadgen.analysis.runs import AnalysisError
from loadgen.config import FINAL_STATES, SLO, RunState
from loadgen.metrics import DenseHistogram, decode_histogram, view_from_hdr
from loadgen.record import JsonObject, RecordError, read_record, step_from_line
from loadgen.slo import best_step
from loadgen.snapshot import (
    METRICS,
    ClientHealth,
    GPUSample,
    HistogramView,
    SeriesPoint,
    ServerTelemetry,
    Snapshot,
    StepSummary,
    WindowStats,
)

__all__ = ["ReplayRun", "load_replay", "run_window", "series_points", "snapshot_at"]

SERIES_KEYS = ("t_s", "out_tok_s", "prefill_tok_s", "req_s", "in_flight", "level")


@dataclass(frozen=True, slots=True)
class ReplayRun:
    path: str
    header: JsonObject
    steps: tuple[StepSummary, ...]
    starts_s: tuple[float, ...]  # each step's start (its warm-up's) on the run's clock
    series: tuple[SeriesPoint, ...]  # the 1 Hz throughput series; () in a record written before it
    marks: tuple[tuple[float, str], ...]  # (seconds since the run began, note)
    warnings: tuple[str, ...]
    state: RunState  # how the run ended ("stopped" when the record has no end: killed mid-run)
    message: str
    elapsed_s: float
    best_step: int | None
    slo: SLO
    run: WindowStats  # every step's measurement window together


def _step_line_numbers(path: str) -> list[int]:
    """The file line number of each step line, in order (the writer puts ``"type":"step"`` first)."""
    try:
        with open(path, encoding="utf-8") as f:
            return [n for n, line in enumerate(f, start=1) if line.startswith('{"type":"step"')]
    except OSError:
        return []


def series_points(columns: object) -> list[SeriesPoint]:
    """A line's ``series`` columns as points; ValueError when they are not equal-length number lists."""
    if not isinstance(columns, Mapping):
        raise ValueError("'series' is not an object")
    lists = [columns.get(key) for key in SERIES_KEYS]
    if not all(isinstance(values, list) for values in lists):
        missing = [k for k, v in zip(SERIES_KEYS, lists, strict=True) if not isinstance(v, list)]
        raise ValueError(f"'series' lacks the list {missing[0]!r}")
    if len({len(values) for values in lists if isinstance(values, list)}) > 1:
        raise ValueError("'series' columns differ in length")
    points = []
    for t, out, prefill, req, in_flight, level in zip(*lists, strict=True):
        numbers = (t, out, prefill, req, in_flight, level)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            raise ValueError("'series' holds a value that is not a number")
        points.append(
            SeriesPoint(float(t), float(out), float(prefill), float(req), int(in_flight), int(level))
        )
    return points


def _slo(header: Mapping[str, Any]) -> SLO:
    given = header.get("slo")
    if not isinstance(given, Mapping):
        return SLO()
    names = {f.name for f in fields(SLO)}
    return SLO(**{k: float(v) for k, v in given.items() if k in names and isinstance(v, int | float)})


def _merge_views(lines: Sequence[Mapping[str, Any]]) -> dict[str, HistogramView]:
    views: dict[str, HistogramView] = {}
    for metric in METRICS:
        dense: DenseHistogram | None = None
        for line in lines:
            b64 = (line.get("hists") or {}).get(metric)
            if b64:
                dense = dense or DenseHistogram(metric)
                dense.add_hdr(decode_histogram(b64))
        if dense is not None:
            views[metric] = view_from_hdr(dense.hdr, metric)
    return views


def run_window(steps: Sequence[StepSummary], lines: Sequence[Mapping[str, Any]]) -> WindowStats:
    """Every step's window as one (the console's "whole run" window): counts summed, rates over the summed
    window time, percentiles from the merged histograms."""
    errors: dict[str, int] = {}
    for step in steps:
        for kind, count in step.stats.errors.items():
            errors[kind] = errors.get(kind, 0) + count
    seconds = sum(step.stats.duration_s or step.window_s for step in steps)
    ok = sum(step.stats.ok for step in steps)
    output = sum(step.stats.output_tokens for step in steps)
    prompt = sum(step.stats.input_tokens for step in steps)
    per_s = (lambda n: n / seconds) if seconds > 0 else (lambda n: None)
    return WindowStats(
        window="run",
        duration_s=seconds,
        ok=ok,
        errors=errors,
        cancelled=sum(step.stats.cancelled for step in steps),
        input_tokens=prompt,
        output_tokens=output,
        cached_tokens=sum(step.stats.cached_tokens for step in steps),
        out_tok_s=per_s(output),
        prefill_tok_s=per_s(prompt),
        req_s=per_s(ok),
        approx_tokens=sum(step.stats.approx_tokens for step in steps),
        hist=_merge_views(lines),
    )


def _events(events: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[float, str]], list[str], JsonObject]:
    marks, warnings, end = [], [], {}
    for event in events:
        kind = event.get("kind")
        if kind == "mark" and isinstance(event.get("elapsed_s"), int | float):
            marks.append((float(event["elapsed_s"]), str(event.get("note", ""))))
        elif kind == "warning" and event.get("note"):
            warnings.append(str(event["note"]))
        elif kind == "end":
            end = dict(event)
    return marks, warnings, end


def load_replay(path: str) -> ReplayRun:
    """Read ``path`` for the console; ``AnalysisError`` (one line: file, line, what is wrong) otherwise."""
    try:
        record = read_record(path)
    except RecordError as exc:
        raise AnalysisError(str(exc)) from None
    numbers = _step_line_numbers(path)
    steps: list[StepSummary] = []
    starts: list[float] = []
    series: list[SeriesPoint] = []
    for n, line in enumerate(record.steps):
        where = f"{path} line {numbers[n]}" if n < len(numbers) else f"{path}: step line {n + 1}"
        try:
            steps.append(step_from_line(line))
            if "series" in line:
                series += series_points(line["series"])
        except (TypeError, ValueError, KeyError) as exc:
            raise AnalysisError(f"{where}: a damaged step line ({exc}); is the record complete?") from None
        started = line.get("started_s")
        starts.append(float(started) if isinstance(started, int | float) else math.nan)
    if not steps:
        raise AnalysisError(f"{path}: no finished step in this record, nothing to replay")
    marks, warnings, end = _events(record.events)
    try:
        series += series_points(end["series"]) if "series" in end else []
    except ValueError as exc:
        raise AnalysisError(f"{path}: the end line's series is damaged ({exc})") from None
    state = end.get("state")
    elapsed = end.get("elapsed_s")
    last_t = series[-1].t_s if series else 0.0
    return ReplayRun(
        path=path,
        header=record.header,
        steps=tuple(steps),
        starts_s=_fill_starts(starts, steps),
        series=tuple(sorted(series, key=lambda p: p.t_s)),
        marks=tuple(marks),
        warnings=tuple(warnings),
        state=next((s for s in FINAL_STATES if s == state), "stopped"),
        message=str(end.get("message") or ("" if end else "the record has no end line (the run was killed)")),
        elapsed_s=float(elapsed) if isinstance(elapsed, int | float) else last_t,
        best_step=best_step(steps),
        slo=_slo(record.header),
        run=run_window(steps, record.steps),
    )


def _fill_starts(starts: list[float], steps: Sequence[StepSummary]) -> tuple[float, ...]:
    """Steps of an older record lack ``started_s``: laid end to end from the first one known (or 0)."""
    out: list[float] = []
    for started in starts:
        if math.isnan(started):
            started = out[-1] + steps[len(out) - 1].duration_s if out else 0.0
        out.append(started)
    return tuple(out)


def _server(
    step: StepSummary, runtime: str | None, conditions: Mapping[str, Any] | None = None
) -> ServerTelemetry | None:
    """The step's server figures (over its window, from its record line) as the server panel reads them;
    the GPU's name and memory size from the header's server conditions (a step line has only its use)."""
    s = step.server
    if not any(v is not None for v in s.values()):
        return None
    gpu = (s.get("gpu_mem_used_max_mib"), s.get("gpu_util_mean"), s.get("power_mean_w"))
    held = conditions or {}
    total = held.get("gpu_mem_total_mib")
    name = str(held.get("gpu_name") or "")
    gpus = (
        (
            GPUSample(
                0, name, gpu[0], float(total) if isinstance(total, (int, float)) else None, gpu[1], gpu[2]
            ),
        )
        if any(v is not None for v in gpu)
        else ()
    )
    return ServerTelemetry(
        runtime=runtime,
        kv_cache_usage=s.get("kv_usage_mean"),
        running=s.get("running_mean"),
        waiting=s.get("waiting_max"),
        prefix_cache_hit_rate=s.get("prefix_cache_hit_rate"),
        spec_acceptance=s.get("spec_acceptance"),
        server_ttft_ms_p50=s.get("server_ttft_p50_ms"),
        server_ttft_ms_p95=s.get("server_ttft_p95_ms"),
        server_itl_ms_p50=s.get("server_itl_p50_ms"),
        gen_tok_s=s.get("gen_tok_s"),
        prompt_tok_s=s.get("prompt_tok_s"),
        gpus=gpus,
        sources={"record": "ok"},
    )


def _conditions(header: Mapping[str, Any]) -> Mapping[str, Any] | None:
    held = header.get("server_conditions")
    return held if isinstance(held, dict) else None


def _text(header: Mapping[str, Any], key: str) -> str | None:
    value = header.get(key)
    return str(value) if value is not None else None


def snapshot_at(run: ReplayRun, position: int) -> Snapshot:
    """The run looked at on ``run.steps[position]``: that step's figures in the step window, the whole
    run's in the run window, every step in the table and on the curve, the whole timeline."""
    step = run.steps[position]
    header = run.header
    return Snapshot(
        seq=position + 1,
        elapsed_s=run.elapsed_s,
        state=run.state,
        url=_text(header, "target_url") or "",
        model=_text(header, "model") or "",
        runtime=_text(header, "runtime"),
        runtime_version=_text(header, "runtime_version"),
        profile=_text(header, "profile") or "",
        mode=step.mode,
        level=step.level,
        rate_rps=step.rate_rps,
        achieved_rps=step.stats.req_s if step.mode == "open" else None,
        arrival=step.arrival,
        paused=False,
        auto_ramp=False,
        step_index=position,
        step_count=len(run.steps),
        step_elapsed_s=step.duration_s,
        step_remaining_s=None,
        warming_up=False,
        in_flight=0,
        queued=0,
        windows={"step": step.stats, "run": run.run},
        rolling_s=10.0,
        series=run.series,
        step_starts_s=run.starts_s,
        steps=run.steps,
        best_step=run.best_step,
        slo=run.slo,
        health=ClientHealth(client_bound=step.client_bound, reason=step.bound_reason),
        recent_errors=tuple(f"{kind}: {text}" for kind, text in step.latest_errors.items()),
        warnings=run.warnings,
        server=_server(step, _text(header, "runtime"), _conditions(header)),
        record_path=run.path,
        marks=run.marks,
        message=run.message,
        latest_errors=step.latest_errors,
        selected=position,
    )
