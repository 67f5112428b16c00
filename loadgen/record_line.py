"""The step line of a run record, declared once: every key a step line holds, in the order written, how
it is written from a ``StepSummary`` (and the step's encoded histograms) and how it reads back.

The metrics' keys come from the catalogue (``loadgen.measures``): the per-request token counts'
``<name>_per_req``, each metric's at-a-glance percentiles, every percentile under ``pct`` and the encoded
histograms under ``hists``. ``loadgen.record`` writes and reads the lines; this module says what is in them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loadgen import measures
from loadgen.metrics import decode_histogram, view_from_hdr
from loadgen.snapshot import (
    METRICS,
    HistogramView,
    Percentiles,
    ReplicaStats,
    SLOVerdict,
    StepSummary,
    WindowStats,
)
from loadgen.stats import Interval

__all__ = ["STEP_LINE", "JsonObject", "StepKey", "step_from_line", "step_line"]

JsonObject = dict[str, Any]  # one line of a record, as ``json.loads`` returns it


# ---- the step line, declared once ---------------------------------------------------------------------
#
# Every key of a step line, in the order written: how it is written from a StepSummary (and the step's
# encoded histograms), and how it reads back. ``into`` names the field a key fills on read: a StepSummary
# field, ``stats.<field>`` (its WindowStats) or ``verdict.<field>`` (its SLOVerdict). A key without a
# reader is derived from others: written for readers of the file, recomputed rather than read back. A key
# absent from a line (a record written before it existed) reads as key ``fallback``, else as ``default``.

Writer = Callable[[StepSummary, Mapping[str, str]], object]
Reader = Callable[[Any], object]  # the JSON value -> the field's value


@dataclass(frozen=True, slots=True)
class StepKey:
    key: str
    write: Writer
    read: Reader | None = None  # None: derived, not read back
    into: str = ""
    default: object = None
    fallback: str = ""
    only_if: Callable[[StepSummary], bool] | None = None  # written only when true


def _step(get: Callable[[StepSummary], object]) -> Writer:
    return lambda step, _hists: get(step)


def _stats(get: Callable[[WindowStats], object]) -> Writer:
    return lambda step, _hists: get(step.stats)


def _summary(metric: str, points: tuple[str, ...]) -> Writer:
    """The at-a-glance percentiles of one metric (the full set is under "pct")."""

    def write(step: StepSummary, _hists: Mapping[str, str]) -> object:
        pct = step.stats.pct(metric).as_dict()
        return {p: pct[p] for p in points}

    return write


def _per_request(metric: str, points: tuple[str, ...]) -> Writer:
    """p50/p95/mean of a per-request token count, from its histogram (no WindowStats field holds it)."""

    def write(_step: StepSummary, hists: Mapping[str, str]) -> object:
        b64 = hists.get(metric)
        if not b64:
            return dict.fromkeys(points)
        pct = _decoded_view(b64, metric).pct.as_dict()
        return {p: pct[p] for p in points}

    return write


_PCT_FIELDS = tuple(f.name for f in dataclasses.fields(Percentiles))


def _pct_from(data: Mapping[str, Any]) -> Percentiles:
    return Percentiles(**{name: data[name] for name in _PCT_FIELDS if data.get(name) is not None})


def _by_class(data: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Percentiles]]:
    return {cls: {m: _pct_from(p) for m, p in metrics.items()} for cls, metrics in data.items()}


def _as_is(value: Any) -> Any:
    return value


def _margins_out(margins: Mapping[str, Interval]) -> JsonObject:
    return {
        name: {
            "value": iv.value,
            "lo": iv.lo,
            "hi": iv.hi,
            "batches": iv.batches,
            "n": iv.n,
            "trusted": iv.trusted,
            **({"why": iv.why} if iv.why else {}),
            **({"need": iv.need} if iv.need else {}),  # open above: about the values that would bound it
            **({"top": iv.top} if iv.top is not None else {}),  # open above: the largest value seen
        }
        for name, iv in margins.items()
        if not math.isnan(iv.value)
    }


def _margins_in(data: Any) -> dict[str, Interval]:
    def num(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    out: dict[str, Interval] = {}
    for name, m in data.items() if isinstance(data, Mapping) else ():
        if not isinstance(m, Mapping) or num(m.get("value")) is None:
            continue
        batches = int(m.get("batches") or 0)
        out[str(name)] = Interval(
            num(m["value"]) or 0.0,
            num(m.get("lo")),
            num(m.get("hi")),
            batches,
            int(m.get("n") or 0),
            float(max(0, batches - 1)),
            bool(m.get("trusted")),
            str(m.get("why") or ""),
            need=m["need"] if isinstance(m.get("need"), int) and not isinstance(m.get("need"), bool) else 0,
            top=num(m.get("top")),
        )
    return out


def _replicas(data: Any) -> tuple[ReplicaStats, ...]:
    names = {f.name for f in dataclasses.fields(ReplicaStats)}
    return tuple(ReplicaStats(**{k: v for k, v in r.items() if k in names}) for r in data)


# The keys before the per-request token counts, between them and the metrics' summaries, and after those.
_HEAD: tuple[StepKey, ...] = (
    # key in the line, written from, read by, into, default when absent
    StepKey("step", _step(lambda s: s.index + 1), lambda n: int(n) - 1, "index", 1),
    StepKey("mode", _step(lambda s: s.mode), str, "mode", "closed"),
    StepKey("level", _step(lambda s: s.level), int, "level", 0),
    StepKey("rate_rps", _step(lambda s: s.rate_rps), _as_is, "rate_rps"),
    StepKey("arrival", _step(lambda s: s.arrival), str, "arrival", ""),
    StepKey("warmup_s", _step(lambda s: s.warmup_s), float, "warmup_s", 0.0),
    StepKey("window_s", _step(lambda s: s.window_s), float, "window_s", 0.0),
    # the host's monotonic clock: for joins with traces and server logs
    StepKey("window_t0_ns", _step(lambda s: s.window_t0_ns), int, "window_t0_ns", 0),
    StepKey("window_t1_ns", _step(lambda s: s.window_t1_ns), int, "window_t1_ns", 0),
    StepKey("duration_s", _step(lambda s: s.duration_s), float, "duration_s", 0.0),
    StepKey("stats_duration_s", _stats(lambda w: w.duration_s), float, "stats.duration_s", 0.0, "window_s"),
    StepKey("ended_by", _step(lambda s: s.ended_by), str, "ended_by", "plan"),
    StepKey("carried_share", _step(lambda s: s.carried_share), float, "carried_share", 0.0),
    # a step a key cut: the reading on its requests done before the key (loadgen.run.censor); {} when none
    StepKey("before_key", _step(lambda s: dict(s.before_key)), dict, "before_key", {}, only_if=lambda s: bool(s.before_key)),
    StepKey("repeat", _step(lambda s: s.repeat), int, "repeat", 0),
    StepKey("cache", _step(lambda s: s.cache), str, "cache", ""),
    StepKey("cache_how", _step(lambda s: s.cache_how), str, "cache_how", ""),
    StepKey("closing_s", _step(lambda s: s.closing_s), float, "closing_s", 0.0),
    StepKey("settling_s", _step(lambda s: s.settling_s), float, "settling_s", 0.0),
    # what makes it not clean besides a cut (snapshot.STEP_FLAGS): worker_lost, closing_cut
    StepKey("flags", _step(lambda s: list(s.flags)), tuple, "flags", ()),
    StepKey("lost_requests", _step(lambda s: s.lost_requests), int, "lost_requests", 0),
    StepKey("ok", _stats(lambda w: w.ok), int, "stats.ok", 0),
    StepKey("errors", _stats(lambda w: dict(w.errors)), dict, "stats.errors", {}),
    StepKey("error_count", _stats(lambda w: w.error_count)),
    StepKey("cancelled", _stats(lambda w: w.cancelled), int, "stats.cancelled", 0),
    StepKey("success_rate", _stats(lambda w: w.success_rate)),
    StepKey("input_tokens", _stats(lambda w: w.input_tokens), int, "stats.input_tokens", 0),
    StepKey("output_tokens", _stats(lambda w: w.output_tokens), int, "stats.output_tokens", 0),
    StepKey("cached_tokens", _stats(lambda w: w.cached_tokens), int, "stats.cached_tokens", 0),
    StepKey("approx_tokens", _stats(lambda w: w.approx_tokens), int, "stats.approx_tokens", 0),
    StepKey("reasoned", _stats(lambda w: w.reasoned), int, "stats.reasoned", 0),
    StepKey("reasoning_tokens", _stats(lambda w: w.reasoning_tokens), int, "stats.reasoning_tokens", 0),
    StepKey("tool_calls", _stats(lambda w: w.tool_calls), int, "stats.tool_calls", 0),
    StepKey("tool_tokens", _stats(lambda w: w.tool_tokens), int, "stats.tool_tokens", 0),
    StepKey("out_of_range", _stats(lambda w: dict(w.out_of_range)), dict, "stats.out_of_range", {}),
    # the whole text of each kind's latest error, so "HTTP 400" comes with what the server said
    StepKey("latest_errors", _step(lambda s: dict(s.latest_errors)), dict, "latest_errors", {}),
    # a managed endpoint's latest x-ratelimit-* values in the step (loadgen.target.ratelimit), {} when none
    StepKey("ratelimit", _step(lambda s: dict(s.ratelimit)), dict, "ratelimit", {}),
)  # fmt: skip
_RATES: tuple[StepKey, ...] = (
    StepKey("out_tok_s", _stats(lambda w: w.out_tok_s), _as_is, "stats.out_tok_s"),
    StepKey("prefill_tok_s", _stats(lambda w: w.prefill_tok_s), _as_is, "stats.prefill_tok_s"),
    StepKey("req_s", _stats(lambda w: w.req_s), _as_is, "stats.req_s"),
    StepKey("goodput_req_s", _stats(lambda w: w.goodput_req_s), _as_is, "stats.goodput_req_s"),
    StepKey("goodput_tok_s", _stats(lambda w: w.goodput_tok_s), _as_is, "stats.goodput_tok_s"),
)  # fmt: skip
_TAIL: tuple[StepKey, ...] = (
    StepKey("slo_met", _step(lambda s: s.verdict.met), _as_is, "verdict.met"),
    StepKey("slo_failures", _step(lambda s: list(s.verdict.failures)), tuple, "verdict.failures", ()),
    # met / missed / undecided on the figures' intervals, and each clause left undecided (loadgen.stats)
    StepKey("slo_verdict", _step(lambda s: s.verdict.on_intervals), _as_is, "verdict.on_intervals"),
    StepKey("slo_undecided", _step(lambda s: list(s.verdict.undecided)), tuple, "verdict.undecided", ()),
    # each percentile above and each rate with its 95 % interval: {"ttft_p95_ms": {"lo", "hi", ...}}
    StepKey("margins", _step(lambda s: _margins_out(s.margins)), _margins_in, "margins", {}),
    StepKey(
        "slo_not_judged",
        _step(lambda s: list(s.verdict.not_judged)),
        tuple,
        "verdict.not_judged",
        (),
        only_if=lambda s: bool(s.verdict.not_judged),
    ),
    StepKey("client_bound", _step(lambda s: s.client_bound), bool, "client_bound", False),
    StepKey(
        "client_bound_reason",
        _step(lambda s: s.bound_reason),
        str,
        "bound_reason",
        "",
        only_if=lambda s: s.client_bound and bool(s.bound_reason),
    ),
    StepKey("server", _step(lambda s: dict(s.server)), dict, "server", {}),
    # the client's TTFT beside the server's queue, prefill and TTFT; and the limit's diagnosis (analysis/)
    StepKey("ttft_split", _step(lambda s: dict(s.ttft_split)), dict, "ttft_split", {}, only_if=lambda s: bool(s.ttft_split)),
    StepKey("diagnosis", _step(lambda s: dict(s.diagnosis)), dict, "diagnosis", {}, only_if=lambda s: bool(s.diagnosis)),
    # answer probes (--quality): agreement with the reference answers (loadgen.analysis.quality)
    StepKey("quality", _step(lambda s: dict(s.quality)), dict, "quality", {}, only_if=lambda s: bool(s.quality)),
    StepKey("marks", _step(lambda s: list(s.marks)), tuple, "marks", ()),
    # Every metric's percentiles and its encoded histogram: read back together into ``stats.hist`` (the
    # drawing bins are recomputed from the histogram), see ``_views``.
    StepKey("pct", _stats(lambda w: {m: w.pct(m).as_dict() for m in METRICS})),
    StepKey(
        "by_class",
        _stats(lambda w: {c: {m: p.as_dict() for m, p in ms.items()} for c, ms in w.by_class.items()}),
        _by_class,
        "stats.by_class",
        {},
    ),
    StepKey("hists", lambda _step, hists: dict(hists)),
    # Several replicas as one target: each one's share of the step, and each one that served nothing.
    StepKey("replicas", _step(lambda s: [dataclasses.asdict(r) for r in s.replicas]), _replicas, "replicas", (), only_if=lambda s: bool(s.replicas)),
    StepKey("idle_replicas", _step(lambda s: list(s.idle_replicas)), tuple, "idle_replicas", (), only_if=lambda s: bool(s.replicas)),
)  # fmt: skip


def _step_line(metrics: object, _clauses: object) -> tuple[StepKey, ...]:
    """Every key of a step line, in order; the metrics' keys from the catalogue (``loadgen.measures``)."""
    return (
        *_HEAD,
        # each per-request token count's p50/p95/mean (``measures.token_metrics``)
        *(
            StepKey(f"{m.name}_per_req", _per_request(m.name, m.step_points))
            for m in measures.token_metrics()
        ),
        *_RATES,
        # the at-a-glance percentiles of each metric: the latencies, then the rates (``measures.line_metrics``)
        *(StepKey(m.name, _summary(m.name, m.step_points)) for m in measures.line_metrics()),
        *_TAIL,
    )


# The step line's keys, derived again whenever the catalogue changes.
STEP_LINE = measures.derived(_step_line)


def step_line(step: StepSummary, hists: Mapping[str, str]) -> JsonObject:
    """The step line of ``step`` (before secrets are scrubbed), keys in ``STEP_LINE`` order."""
    line: JsonObject = {"type": "step"}
    for key in STEP_LINE():
        if key.only_if is None or key.only_if(step):
            line[key.key] = key.write(step, hists)
    return line


def _decoded_view(b64: str, key: str) -> HistogramView:
    try:
        return view_from_hdr(decode_histogram(b64), key)
    except Exception as exc:  # hdrh raises its own cookie/length errors, zlib and base64 errors
        raise ValueError(f"histogram {key!r} cannot be decoded ({type(exc).__name__}: {exc})") from None


def _views(line: Mapping[str, Any]) -> dict[str, HistogramView]:
    pct = line.get("pct") or {}
    hists = line.get("hists") or {}
    views: dict[str, HistogramView] = {}
    for metric, unit in METRICS.items():
        bins = _decoded_view(hists[metric], metric).bins if metric in hists else ()
        views[metric] = HistogramView(
            metric=metric, unit=unit, pct=_pct_from(pct.get(metric) or {}), bins=bins
        )
    return views


def step_from_line(line: Mapping[str, Any]) -> StepSummary:
    """Rebuild a StepSummary from a step line (bins recomputed from the stored histograms), schema 1 too."""
    if "step" not in line and isinstance(line.get("index"), int):
        line = {**line, "step": line["index"] + 1}
    # each value passed its key's reader: the constructors below get the types they declare
    parts: dict[str, JsonObject] = {
        "": {},
        "stats": {"window": "step", "hist": _views(line)},
        "verdict": {},
    }
    for key in STEP_LINE():
        if key.read is None:
            continue
        raw = line.get(key.key)
        if raw is None and key.fallback:
            raw = line.get(key.fallback)
        owner, _, name = key.into.rpartition(".")
        parts[owner][name] = key.read(key.default if raw is None else raw)  # a fresh copy of a default too
    return StepSummary(
        **parts[""], stats=WindowStats(**parts["stats"]), verdict=SLOVerdict(**parts["verdict"])
    )
