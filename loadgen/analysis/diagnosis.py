"""Why a step stops scaling: a diagnosis of the limiting mechanism from the step's client figures, the
server's telemetry over its window and the steps before it (trends across levels).

``diagnose`` is pure: ``{"kind", "confidence", "evidence", "first_checks"}`` with ``kind`` one of
``KINDS``. It names a mechanism only when its evidence shows (waiting requests, a full KV cache or
preemptions, per-stream decode falling with no queue, prefill time driving a growing TTFT, time outside
the server dominating TTFT, failures, ramp's own limit); when two unrelated mechanisms show at once, or
latency grows with none showing, it says ``unknown`` and which. Without server telemetry it tells
``none``, ``client`` and ``errors`` apart and says which causes telemetry would separate. Bad input (too
few requests, a server reporting more running requests than the level; server figures that are not the
server's: telemetry lost, counters gone back, buckets changed, ``StepFigures.doubt``) is ``unknown`` with
the reason, never an exception. A measuring step's diagnosis so far (``loadgen.run.live_diagnosis``) is the
same function on its figures until now, marked ``provisional``. The thresholds are the module's
constants, and docs/measurement.md ("Diagnosis") explains each. ``with_answers`` adds an evidence line
where the step's answer probes (``--quality``) changed: no kind of its own, an answer change limits no load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loadgen import measures
from loadgen.analysis.quality import agreement_text
from loadgen.analysis.ttft_split import outside_share, split_line
from loadgen.format import fmt_ms, fmt_pct, fmt_setting
from loadgen.snapshot import StepSummary
from loadgen.types import ErrorKind

Kind = Literal[
    "none", "queueing", "kv_cache", "decode_bound", "prefill_bound", "client", "network", "errors", "unknown"
]
KINDS: tuple[Kind, ...] = (
    "none", "queueing", "kv_cache", "decode_bound", "prefill_bound", "client", "network", "errors", "unknown",
)  # fmt: skip
Confidence = Literal["high", "medium", "low"]
SERVER_SIDE: tuple[Kind, ...] = ("queueing", "kv_cache")  # shown by the server's own figures alone

MIN_REQUESTS = 8  # fewer finished requests in a step: too few to read a mechanism from
ERROR_SHARE = 0.05  # failures past this share of the step's requests cap the load
KV_FULL = 0.95  # KV usage at or past this (the step's max) is a full cache
KV_BUSY = 0.85  # ... and past this, waiting requests are waiting for KV room
WAITING = 1.0  # the server's waiting queue at or past this (the step's max) is a queue
QUEUE_SHARE = 0.3  # the server's mean queue time past this share of its mean TTFT: requests wait
OUTSIDE_SHARE = 0.5  # time outside the server past this share of the client's mean TTFT ...
OUTSIDE_MS = 20.0  # ... and past this many ms: the wire dominates
PREFILL_SHARE = 0.5  # the server's mean prefill time past this share of its mean TTFT ...
PREFILL_STEPS = 4.0  # ... and past this many of the server's decode steps (ITL p50): prefill drives TTFT
TTFT_GROWTH = 1.5  # TTFT p50 past this multiple of the first step's ...
TTFT_GROWTH_MS = 25.0  # ... and this many ms above it: latency grows (a step's own cost is not growth)
DECODE_DROP = 0.75  # per-stream decode p50 below this share of the first step's: decode slows
SCALING = 0.7  # tok/s per stream below this share of the first step's: tok/s flattens
LEVEL_SLACK = 1.1  # running requests past the level by this factor: other traffic, or a lying server

CHECKS: Mapping[Kind, tuple[str, ...]] = {
    "none": ("raise the load: nothing limits it yet",),
    "queueing": ("max-num-seqs (the batch limit)", "KV capacity", "queueing policy, request length mix"),
    "kv_cache": ("KV capacity (gpu-memory-utilization, max-model-len)", "preemptions", "KV residency of long prompts"),
    "decode_bound": ("batch size against time per token (max-num-seqs)", "memory bandwidth", "kernels, precision"),
    "prefill_bound": ("prefill rate (max-num-batched-tokens, chunked prefill)", "prefix-cache hit rate", "prompt lengths, warm-up"),
    "client": ("ramp's own limit: --workers, the client's CPU", "the step's client-bound reason"),
    "network": ("a proxy or load balancer in the path", "TLS and HTTP overhead", "where client and server run"),
    "errors": ("the server's error messages (e)", "rate limits (x-ratelimit-*)", "timeouts"),
    "unknown": ("the server's telemetry beside the client's figures", "a longer step"),
}  # fmt: skip
NO_TELEMETRY = (
    "server telemetry (/metrics) would tell queueing, kv_cache, decode_bound, prefill_bound and network apart"
)


@dataclass(frozen=True, slots=True)
class StepFigures:
    """What the diagnosis reads of one step: the client's figures, the server's window, the TTFT split."""

    level: int
    ok: int
    errors: int
    rate_limited: int
    out_tok_s: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    decode_p50_tok_s: float | None
    client_bound: bool
    bound_reason: str
    server: Mapping[str, float | None]
    split: Mapping[str, object]
    # why the server's figures over the window are not its own (telemetry lost, counters gone back,
    # buckets changed: ``loadgen.telemetry.doubts``); '' when they are, or when there are none
    doubt: str = ""

    @classmethod
    def of(cls, step: StepSummary, split: Mapping[str, object] | None = None, doubt: str = "") -> StepFigures:
        st = step.stats
        ttft, decode = st.pct(measures.TTFT_MS), st.pct(measures.DECODE_TOK_S)
        return cls(
            level=step.level,
            ok=st.ok,
            errors=st.error_count,
            rate_limited=st.errors.get(ErrorKind.HTTP_429.value, 0),
            out_tok_s=st.out_tok_s,
            ttft_p50_ms=ttft.p50,
            ttft_p95_ms=ttft.p95,
            decode_p50_tok_s=decode.p50,
            client_bound=step.client_bound,
            bound_reason=step.bound_reason,
            server=step.server,
            split=step.ttft_split if split is None else split,
            doubt=doubt,
        )

    def num(self, key: str) -> float | None:
        v = self.server.get(key)
        return v if isinstance(v, (int, float)) and not math.isnan(v) else None

    def part_mean(self, part: str) -> float | None:
        p = self.split.get(part)
        v = p.get("mean_ms") if isinstance(p, Mapping) else None
        return float(v) if isinstance(v, (int, float)) else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A diagnosis before it is written: ``as_dict`` is the step line's ``diagnosis``."""

    kind: Kind
    confidence: Confidence
    evidence: tuple[str, ...]
    first_checks: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "confidence": self.confidence,
            "evidence": list(self.evidence),
            "first_checks": list(self.first_checks),
        }


def _verdict(
    kind: Kind, confidence: Confidence, evidence: Sequence[str], checks: Sequence[str] = ()
) -> Verdict:
    return Verdict(kind, confidence, tuple(evidence), tuple(checks or CHECKS[kind]))


def _ratio(now: float | None, then: float | None) -> float | None:
    if now is None or then is None or then <= 0:
        return None
    return now / then


def _grew(now: float | None, then: float | None) -> bool:
    r = _ratio(now, then)
    return (
        r is not None
        and now is not None
        and then is not None
        and r >= TTFT_GROWTH
        and now - then >= TTFT_GROWTH_MS
    )


@dataclass(frozen=True, slots=True)
class Trend:
    """The step against the first step with enough requests (the lowest load): growth of TTFT, decode per
    stream and tok/s per stream, and the last level at which TTFT had not grown yet."""

    ttft: float | None
    decode: float | None
    per_stream: float | None
    since_level: int | None
    ttft_grew: bool = False  # past TTFT_GROWTH times and TTFT_GROWTH_MS above the first step's p50

    @classmethod
    def of(cls, now: StepFigures, before: Sequence[StepFigures]) -> Trend:
        base = next((s for s in before if s.ok >= MIN_REQUESTS and s.level > 0), None)
        if base is None or base.level >= now.level:
            return cls(None, None, None, None)
        per_now = _ratio(now.out_tok_s, float(now.level))
        per_base = _ratio(base.out_tok_s, float(base.level))
        flat = [
            s.level
            for s in before
            if (r := _ratio(s.ttft_p95_ms, base.ttft_p95_ms)) is not None and r < TTFT_GROWTH
        ]
        return cls(
            ttft=_ratio(now.ttft_p50_ms, base.ttft_p50_ms),
            decode=_ratio(now.decode_p50_tok_s, base.decode_p50_tok_s),
            per_stream=_ratio(per_now, per_base),
            since_level=max(flat) if flat else None,
            ttft_grew=_grew(now.ttft_p50_ms, base.ttft_p50_ms),
        )

    def ttft_words(self, now: StepFigures, before: Sequence[StepFigures]) -> str | None:
        base = next((s for s in before if s.ok >= MIN_REQUESTS and s.level > 0), None)
        r = _ratio(now.ttft_p95_ms, base.ttft_p95_ms if base else None)
        if r is None or r < TTFT_GROWTH:
            return None
        since = f" since {self.since_level} streams" if self.since_level else ""
        return f"TTFT p95 ×{fmt_setting(round(r, 1))}{since}"


def _bad_input(now: StepFigures) -> str | None:
    if now.ok + now.errors < MIN_REQUESTS:
        return f"too few requests in the step ({now.ok + now.errors} < {MIN_REQUESTS})"
    running = now.num("running_max")
    if running is not None and now.level > 0 and running > now.level * LEVEL_SLACK + 1:
        return f"the server reports {fmt_setting(running)} running at level {now.level} (other traffic, or a server that miscounts)"
    return None


def diagnose(now: StepFigures, before: Sequence[StepFigures] = ()) -> dict[str, object]:
    """The step's limiting mechanism, with its evidence and first checks (see the module's docstring)."""
    try:
        return _diagnose(now, before).as_dict()
    except (ArithmeticError, TypeError, ValueError) as exc:  # a figure of a shape nobody foresaw
        return _verdict("unknown", "low", [f"the figures could not be read ({type(exc).__name__})"]).as_dict()


def _diagnose(now: StepFigures, before: Sequence[StepFigures]) -> Verdict:
    bad = _bad_input(now)
    if bad is not None:
        return _verdict("unknown", "low", [bad])
    done = now.ok + now.errors
    if now.errors / done > ERROR_SHARE:
        evidence = [f"{fmt_pct(now.errors / done)} of requests failed ({now.errors} of {done})"]
        if now.rate_limited:
            evidence.append(f"{now.rate_limited} rate limited (HTTP 429)")
        return _verdict("errors", "high", evidence)
    trend = Trend.of(now, before)
    if now.doubt:
        return _doubted(now, trend)
    has_server = any(now.num(k) is not None for k in ("running_max", "waiting_max", "kv_usage_max")) or bool(
        now.split
    )
    found = _with_server(now, before, trend) if has_server else None
    if now.client_bound:
        bound = f"ramp itself is the limit: {now.bound_reason or 'client-bound'}"
        # A queue or a full KV cache in the server's own figures is not the client's doing (a slow client
        # sends less, not more): named, with the client's state beside it. Anything else read from the
        # client's clock (TTFT growth, decode per stream, time outside the server) may be the client's.
        if found is not None and found.kind in SERVER_SIDE:
            return _verdict(found.kind, "medium", [*found.evidence, f"and {bound}"])
        return _verdict("client", "high", [bound])
    return found if found is not None else _without_server(now, trend)


def _doubted(now: StepFigures, trend: Trend) -> Verdict:
    """The server's figures over the step are not its own: only the client's are read (ramp's own limit),
    and the rest is ``unknown`` with the doubt."""
    unread = f"{now.doubt}: its figures over the step are not read"
    if now.client_bound:
        bound = f"ramp itself is the limit: {now.bound_reason or 'client-bound'}"
        return _verdict("client", "high", [bound, unread])
    evidence = [unread, *_trend_words(trend)]
    return _verdict("unknown", "low", evidence, ("the server's /metrics and its log", "the step again"))


def _scaling(trend: Trend) -> bool:
    """Still scaling: TTFT flat and tok/s growing with the streams (its share per stream held), or nothing to
    compare with yet. Decode per stream is read only where there is no tok/s to compare: a batch that slows
    each stream while tok/s still grows nearly in step is the engine's normal cost, not its limit
    (bench_diagnosis's h200 engine decodes at 74 % of its one-stream speed at 32 streams, tok/s per stream at
    74 %: read decode_bound against DECODE_DROP alone, where the issue's kind needs tok/s to flatten too)."""
    if trend.ttft_grew:
        return False
    if trend.per_stream is not None:
        return trend.per_stream >= SCALING
    return trend.decode is None or trend.decode >= DECODE_DROP


def _without_server(now: StepFigures, trend: Trend) -> Verdict:
    if _scaling(trend):
        words = (
            "tok/s grows with the streams, latency flat"
            if trend.ttft is not None
            else "no earlier step to compare with"
        )
        return _verdict("none", "medium" if trend.ttft is not None else "low", [words, NO_TELEMETRY])
    evidence = [w for w in _trend_words(trend) if w]
    evidence.append(
        f"without it the cause is one of queueing, kv_cache, decode_bound, prefill_bound, network: {NO_TELEMETRY}"
    )
    return _verdict(
        "unknown", "low", evidence, ("the server's /metrics (--metrics-url)", *CHECKS["unknown"][1:])
    )


def _trend_words(trend: Trend) -> list[str]:
    out = []
    if trend.ttft is not None and trend.ttft_grew:
        out.append(f"TTFT p50 ×{fmt_setting(round(trend.ttft, 1))} the first step's")
    if trend.decode is not None and trend.decode < DECODE_DROP:
        out.append(f"decode per stream at {fmt_pct(trend.decode, 0)} of the first step's")
    if trend.per_stream is not None and trend.per_stream < SCALING:
        out.append(f"tok/s per stream at {fmt_pct(trend.per_stream, 0)} of the first step's")
    return out


def _with_server(now: StepFigures, before: Sequence[StepFigures], trend: Trend) -> Verdict:
    signs: dict[Kind, list[str]] = {}
    waiting, kv, pre = now.num("waiting_max"), now.num("kv_usage_max"), now.num("preemptions")
    server_ttft, queue, prefill = now.part_mean("server"), now.part_mean("queue"), now.part_mean("prefill")
    decode_words = "decode flat" if trend.decode is None or trend.decode >= DECODE_DROP else "decode falling"
    if (kv is not None and kv >= KV_FULL) or (pre is not None and pre > 0):
        words = [f"KV cache {fmt_pct(kv, 0)} full" if kv is not None else "KV usage n/a"]
        if pre:
            words.append(f"{fmt_setting(pre)} preemptions")
        signs["kv_cache"] = words
    queue_share = _ratio(queue, server_ttft)
    if (
        waiting is not None
        and waiting >= WAITING
        and _queued(now, trend, waiting, queue, prefill, queue_share)
    ):
        words = [f"{fmt_setting(waiting)} waiting"]
        if queue_share is not None:
            words.append(f"queue {fmt_pct(queue_share, 0)} of the server's TTFT")
        if (grown := trend.ttft_words(now, before)) is not None:
            words.append(grown)
        words.append(decode_words)
        if kv is not None and kv >= KV_BUSY and "kv_cache" not in signs:
            # waiting beside a nearly full cache: they wait for KV room, not for a batch slot
            signs["kv_cache"] = [f"KV cache {fmt_pct(kv, 0)} full"]
        signs["queueing"] = words
    share = outside_share(now.split)
    outside = now.split.get("outside")
    outside_ms = outside.get("mean_ms") if isinstance(outside, Mapping) else None
    if (
        share is not None
        and _comparable(now.split)
        and share >= OUTSIDE_SHARE
        and isinstance(outside_ms, (int, float))
        and outside_ms >= OUTSIDE_MS
    ):
        signs["network"] = [f"{fmt_ms(float(outside_ms))} of TTFT outside the server ({fmt_pct(share, 0)})"]
    prefill_share = _ratio(prefill, server_ttft)
    itl = now.num("server_itl_p50_ms")
    # prefill dominates when a request's prefill outlasts several decode steps: then it drives TTFT (and
    # stalls the decodes beside it); a prefill of a step or two only follows the step's own cost. Under a
    # heavy prefill load the decode steps stall behind the prefills and last as long as they do, so the
    # prompts are also long when they were at the first step, on a server that still had time for both
    first = before[0] if before else None
    long_prefill = _outlasts(prefill, itl) or (
        prefill is not None
        and first is not None
        and _outlasts(first.part_mean("prefill"), first.num("server_itl_p50_ms"), need_itl=True)
    )
    unqueued = "queueing" not in signs and "kv_cache" not in signs
    if not _scaling(trend) and unqueued:
        if long_prefill and prefill_share is not None and prefill_share >= PREFILL_SHARE:
            signs["prefill_bound"] = [
                f"prefill {fmt_pct(prefill_share, 0)} of the server's TTFT ({fmt_ms(prefill)})",
                *_trend_words(trend),
            ]
        elif _decode_bound(trend):
            signs["decode_bound"] = [*_trend_words(trend), "no queue"]
    return _judge(now, signs, trend)


def _decode_bound(trend: Trend) -> bool:
    """Batching slows each stream (decode per stream under ``DECODE_DROP`` of the first step's) and tok/s
    flattens with it (per stream under ``SCALING``, where there is a tok/s to compare)."""
    return (
        trend.decode is not None
        and trend.decode < DECODE_DROP
        and (trend.per_stream is None or trend.per_stream < SCALING)
    )


def _outlasts(prefill: float | None, itl: float | None, need_itl: bool = False) -> bool:
    """A mean prefill of ``PREFILL_STEPS`` decode steps (the server's ITL p50) or more; without an ITL, any
    prefill, unless ``need_itl``."""
    if prefill is None:
        return False
    if itl is None:
        return not need_itl
    return prefill >= PREFILL_STEPS * itl


def _comparable(split: Mapping[str, object]) -> bool:
    """The client's and the server's TTFT count about the same requests (each at least ``MIN_REQUESTS``,
    within a factor of 2 of each other): else their means' difference is not time outside the server but
    two different sets of requests (long ones finishing in a window whose first tokens came before it)."""
    counts = [p.get("n") if isinstance(p := split.get(k), Mapping) else None for k in ("client", "server")]
    if not all(isinstance(n, (int, float)) and n >= MIN_REQUESTS for n in counts):
        return False
    a, b = (float(n) for n in counts if isinstance(n, (int, float)))
    return max(a, b) <= 2 * min(a, b)


def _queued(
    now: StepFigures,
    trend: Trend,
    waiting: float,
    queue: float | None,
    prefill: float | None,
    queue_share: float | None,
) -> bool:
    """Requests wait for a slot, not just for the step in progress: their mean queue time is past their
    prefill time and a share of the server's TTFT; without the server's queue time, a queue of a quarter of
    the level (at least 2) while TTFT grows."""
    if queue is not None and queue_share is not None:
        return queue_share >= QUEUE_SHARE and (prefill is None or queue >= prefill)
    grew = trend.ttft_grew
    return grew and waiting >= max(2.0, 0.25 * now.level)


def _judge(now: StepFigures, signs: dict[Kind, list[str]], trend: Trend) -> Verdict:
    # A full KV cache makes requests wait: the queue it causes is its evidence, not a second cause.
    if "kv_cache" in signs and "queueing" in signs:
        signs["kv_cache"] += [w for w in signs.pop("queueing") if w.endswith("waiting")]
    if len(signs) == 1:
        kind, evidence = next(iter(signs.items()))
        return _verdict(kind, "high" if len(evidence) > 1 else "medium", evidence)
    if len(signs) > 1:
        said = "; ".join(f"{k}: {', '.join(v)}" for k, v in signs.items())
        return _verdict(
            "unknown",
            "low",
            [f"conflicting evidence, {said}"],
            tuple(c for k in signs for c in CHECKS[k][:1]),
        )
    if _scaling(trend):
        words = (
            ["no queue, KV cache has room", "tok/s grows with the streams, latency flat"]
            if trend.ttft is not None
            else ["no queue, KV cache has room", "no earlier step to compare with"]
        )
        return _verdict("none", "high" if trend.ttft is not None else "medium", words)
    return _verdict(
        "unknown",
        "low",
        [*_trend_words(trend), "latency grows but no mechanism shows in the server's figures"],
    )


def diagnosis_line(diagnosis: Mapping[str, object]) -> str:
    """One line for the console: 'Limit: queueing — 12 waiting, TTFT p95 ×4 since 32 streams · check
    max-num-seqs (the batch limit), KV capacity'; a measuring step's (``"provisional": true``) starts
    'Limit so far (provisional):'; '' for no diagnosis."""
    kind = diagnosis.get("kind")
    if not isinstance(kind, str):
        return ""
    evidence = diagnosis.get("evidence")
    checks = diagnosis.get("first_checks")
    label = "Limit so far (provisional):" if diagnosis.get("provisional") is True else "Limit:"
    head = f"{label} none yet" if kind == "none" else f"{label} {kind}"
    words = ", ".join(str(e) for e in evidence) if isinstance(evidence, list) else ""
    tail = ", ".join(str(c) for c in checks[:2]) if isinstance(checks, list) and kind != "none" else ""
    return head + (f" — {words}" if words else "") + (f" · check {tail}" if tail else "")


def limit_lines(steps: Sequence[StepSummary]) -> list[str]:
    """The plain-text report's lines under its step table: each step's limit, then each step's TTFT split,
    in the console's words ('limit    step 3 (16): Limit: queueing — …'); none without either."""
    out = [
        f"limit    step {s.index + 1} ({s.level}): {diagnosis_line(s.diagnosis)}"
        for s in steps
        if s.diagnosis
    ]
    out += [
        f"split    step {s.index + 1} ({s.level}): {split_line(s.ttft_split)}" for s in steps if s.ttft_split
    ]
    return ["", *out] if out else []


ANSWER_CHECK = (
    "the answers: batch-dependent numerics (precision, kernels, speculative decoding, prefix caching)"
)


def with_answers(
    diagnosis: Mapping[str, object], quality: Mapping[str, object] | None, agree_min: float | None = None
) -> dict[str, object]:
    """``diagnosis`` with an evidence line naming an answer change, where the step's answer probes
    (``--quality``) agree less than they did: their agreement's 95 % interval lies wholly below the SLO's
    ``quality_agree_min`` or below 1 ('answers changed under load: agreement 0.06 (0.02–0.16) of 63 probes,
    below the SLO's 0.95'), and the answers among its first checks. Not a kind of its own: an answer
    change is no limit to the load, and it can come with any of them. As it was otherwise."""
    out = dict(diagnosis)
    hi = quality.get("agree_hi") if quality else None
    if not quality or not isinstance(hi, int | float) or isinstance(hi, bool) or not out.get("kind"):
        return out
    if agree_min is not None and hi < agree_min:
        where = f"below the SLO's {agree_min:.2f}"
    elif hi < 1.0:
        where = "its interval below 1"
    else:
        return out
    n = quality.get("n")
    line = f"answers changed under load: agreement {agreement_text(quality)} of {n} probes, {where}"
    evidence, checks = out.get("evidence"), out.get("first_checks")
    out["evidence"] = [*(evidence if isinstance(evidence, list) else []), line]
    out["first_checks"] = [*(checks if isinstance(checks, list) else []), ANSWER_CHECK]
    return out
