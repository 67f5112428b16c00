"""The worker side of the metrics: ``Recorder`` folds ``RequestResult``s, ``take()`` ships an ``IntervalDelta``.

A worker records every finished request into counters and per-interval value buffers; every ~250 ms
``take()`` turns them into a small picklable ``IntervalDelta`` (counters plus sparse histogram counts)
and starts the next interval empty. Values are buffered and indexed in one numpy pass (``Layout.index_of``),
because ``hdrh``'s ``record_value`` costs ~2.5 µs a call and one request can bring hundreds of ITL samples.
Values that fall outside a layout (negative, or past the top) are counted under ``oor:<metric>``, never
dropped silently.

Latency histograms hold successful requests only; the schedule lag holds every request that was sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from loadgen import measures
from loadgen.config import SLO
from loadgen.metrics.hdr import IntArray, Layout, spec_for
from loadgen.metrics.replicas import ReplicaKeys
from loadgen.snapshot import EMPTY
from loadgen.tool_messages import probe_text
from loadgen.types import Outcome, RequestResult

__all__ = [
    "DEFAULT_BUCKET",
    "MAX_ERRORS_PER_INTERVAL",
    "SPILL_AT",
    "IntervalDelta",
    "Recorder",
    "SparseCounts",
]

SparseCounts = tuple[npt.NDArray[np.unsignedinteger[Any]], npt.NDArray[np.unsignedinteger[Any]]]
RawParts = dict[str, list[tuple[IntArray, IntArray | None]]]  # key -> (values, counts; None = 1 each)

MAX_ERRORS_PER_INTERVAL = 5
MAX_ERROR_TEXT = 2000  # an error's message as the server said it, whole enough to read (the console: all)
PROBE_TEXT_LIMIT = 4096  # an answer probe's text is kept up to this many characters (loadgen.workload.probes)
# Past this many buffered values a Recorder folds its buffers into sparse counts, so that a worker that is
# never asked for a delta (a script, a stalled controller) stays bounded in memory.
SPILL_AT = 65_536
# Finished requests whose chunk times wait before their ITL samples are folded in one vectorized pass
# (``Recorder.fold_itl``), inside a request's task step: 64 requests of 64 chunks keep the loop ~0.2 ms; all
# at once in the shipment (~700 requests at 1,024 streams) ~2.5 ms (``benchmarks/bench_metrics.py``).
ITL_BATCH = 64
# Class-split histograms: (metric, class key). Bucket "default" is the no-bucket case and would only
# repeat the overall figures.
DEFAULT_BUCKET = "default"


@dataclass(frozen=True)  # no slots: pickling frozen slotted dataclasses breaks on early 3.10 releases
class IntervalDelta:
    """What one worker measured over [t0_ns, t1_ns): counters and sparse histogram counts.

    ``hists`` maps a histogram key to (counts-array indices, counts) as the smallest unsigned numpy
    integer types that hold them, sorted by index, non-empty only. ``live_tokens`` is the output tokens
    streamed in the interval, corrections of finished requests included (what the aggregate out tok/s is
    made of).
    """

    t0_ns: int
    t1_ns: int
    worker_id: int
    counters: Mapping[str, int]
    hists: Mapping[str, SparseCounts]
    live_tokens: int = 0
    in_flight: int = 0
    queued: int = 0
    sent: int = 0
    health: Mapping[str, float] = EMPTY
    backing_off: int = 0  # a gauge: virtual users pausing after a refusal (loadgen.run.loops.Backoff)
    recent_errors: tuple[str, ...] = ()  # "kind: message", the last few of the interval
    ratelimit: tuple[tuple[str, str], ...] = ()  # the interval's latest x-ratelimit-* headers, if any came
    probes: tuple[tuple[int, str | None], ...] = ()  # answer probes done: (index, text; None: it failed)
    # a closed loop's streams (this worker's virtual users) -> (output tokens, requests) they finished ok
    users: Mapping[int, tuple[int, int]] = EMPTY

    @property
    def ok(self) -> int:
        return self.counters.get("ok", 0)

    @property
    def error_count(self) -> int:
        return sum(v for k, v in self.counters.items() if k.startswith("err:"))

    @property
    def cancelled(self) -> int:
        return self.counters.get("cancelled", 0)

    @property
    def input_tokens(self) -> int:
        return self.counters.get("input_tokens", 0)

    @property
    def output_tokens(self) -> int:
        """Successful requests' output tokens (usage), as opposed to ``live_tokens`` (streamed)."""
        return self.counters.get("output_tokens", 0)


def _sparse(
    parts: Sequence[tuple[IntArray, IntArray | None]], layout: Layout
) -> tuple[SparseCounts | None, int]:
    """Raw integer values (with optional per-value counts) -> sorted sparse (index, count), out-of-range."""
    indices: list[IntArray] = []
    weights: list[IntArray] = []
    out_of_range = 0
    for values, counts in parts:
        if values.size == 0:
            continue
        index, bad = layout.index_of(values)
        if counts is None:
            counts = np.ones(values.size, dtype=np.int64)
        if bad.any():
            out_of_range += int(counts[bad].sum())
            keep = ~bad
            index, counts = index[keep], counts[keep]
        indices.append(index)
        weights.append(counts)
    if not indices:
        return None, out_of_range
    index = np.concatenate(indices)
    if index.size == 0:
        return None, out_of_range
    weight = np.concatenate(weights)
    return _compact(np.bincount(index, weights=weight.astype(np.float64)), layout), out_of_range


def _compact(dense: npt.NDArray[Any], layout: Layout) -> SparseCounts | None:
    """Dense counts (by counts-array index) -> sorted sparse (index, count); None when all are zero."""
    nonzero = np.flatnonzero(dense)
    if nonzero.size == 0:
        return None
    counts = dense[nonzero]
    # the smallest integer types that hold them: a delta is pickled 4 times a second per worker
    index_type = np.uint16 if layout.counts_len <= 1 << 16 else np.uint32
    top = counts.max()
    count_type = np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.uint64
    return nonzero.astype(index_type), counts.astype(count_type)


def _itl_samples(
    items: Sequence[tuple[tuple[int, ...], tuple[int, ...] | None, int]],
) -> tuple[IntArray, IntArray]:
    """Per-token ITL in µs and its count from each request's chunk times, in one vectorized pass. The gap
    before a chunk of k tokens is spread over its k tokens (value gap/k, count k). Tokens of the first chunk
    beyond the first have no gap of their own. A chunk with no token hands its gap on to the next."""
    lengths = np.fromiter((len(t) for t, _, _ in items), dtype=np.int64, count=len(items))
    total = int(lengths.sum())
    times = np.fromiter(chain.from_iterable(t for t, _, _ in items), dtype=np.int64, count=total)
    seg = np.repeat(np.arange(len(items), dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    pos = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    # output tokens spread as evenly as possible; the remainder goes to the last chunks so that
    # fewer tokens hide in the first chunk (which yields no ITL samples)
    out = np.fromiter((o for _, _, o in items), dtype=np.int64, count=len(items))
    n = lengths[seg]
    t_out = out[seg]
    base = t_out // n
    rem = t_out - base * n
    tokens = base + (pos >= n - rem)
    exact = [i for i, (t, k, _) in enumerate(items) if k is not None and len(k) == len(t)]
    if exact:
        mask = np.zeros(len(items), dtype=bool)
        mask[exact] = True
        given = np.fromiter(
            chain.from_iterable(items[i][1] or () for i in exact),
            dtype=np.int64,
            count=int(lengths[exact].sum()),
        )
        tokens[mask[seg]] = given
    keep = tokens > 0
    times, tokens, seg = times[keep], tokens[keep], seg[keep]
    same = seg[1:] == seg[:-1]
    gaps = np.diff(times)[same]
    k = tokens[1:][same]
    values = np.rint(gaps / (k * 1000.0)).astype(np.int64)
    return values, k


def _integer_units(key: str, values: list[float]) -> IntArray:
    """One key's buffered source values in its histogram's integer units: ns -> µs (rounded), tok/s ->
    hundredths, counts as they are (by the metric's kind, ``loadgen.measures``)."""
    metric = measures.metric(key)
    if metric.kind == "rate":
        return np.rint(np.asarray(values, dtype=np.float64) * metric.display_div).astype(np.int64)
    ints: IntArray = np.asarray(values, dtype=np.int64)
    if metric.kind == "latency":
        return np.floor_divide(ints + 500, 1000)
    return ints


Measure = tuple[str, Callable[[RequestResult], float | None], tuple[str, ...]]
# What a worker measures of each request, from the catalogue: (name, value, class splits) of the metrics
# measured on every request sent, and of those measured on successes; the one measured per token (ITL).
_SENT = measures.derived(
    lambda ms, _cs: tuple((m.name, m.value, m.splits) for m in ms if m.value is not None and m.every_sent)
)
_OK = measures.derived(
    lambda ms, _cs: tuple((m.name, m.value, m.splits) for m in ms if m.value is not None and not m.every_sent)
)
Judged = tuple[tuple[Callable[[RequestResult], float | None], float, float, bool, bool], ...]


def _judged(slo: SLO) -> Judged:
    """What goodput holds a success to (``SLO.per_request_limits``), with how each figure is read from a
    request: (its value, source units per display unit, limit, ceiling?, missing misses?), read once."""
    out = []
    for name, bound, at_most, misses in slo.per_request_limits():
        metric = measures.metric(name)
        if metric.value is not None:
            out.append((metric.value, metric.source_per_unit, bound, at_most, misses))
    return tuple(out)


def _good(judged: Judged, result: RequestResult) -> bool:
    """``SLO.good`` of one success, its figures read straight from the result (the hot path's)."""
    for value_of, per_unit, bound, at_most, misses in judged:
        value = value_of(result)
        if value is None:
            if misses:
                return False
            continue
        shown = value / per_unit if per_unit != 1.0 else value
        if shown > bound if at_most else shown < bound:
            return False
    return True


_PER_TOKEN = measures.derived(lambda ms, _cs: next(m.name for m in ms if m.value is None))


class Recorder:
    """Folds RequestResults inside a worker; ``take()`` ships and resets the interval's figures."""

    def __init__(self, worker_id: int = 0, slo: SLO | None = None) -> None:
        self.worker_id = worker_id
        self.slo = slo if slo is not None and not slo.is_empty() else None  # goodput's per-request limits
        self._judged = None if self.slo is None else _judged(self.slo)
        self._reset()

    def _reset(self) -> None:
        self._counters: dict[str, int] = {}
        self._values: dict[str, list[float]] = {}
        self._itl: list[tuple[tuple[int, ...], tuple[int, ...] | None, int]] = []
        self._itl_dense: npt.NDArray[Any] | None = None  # the interval's ITL counts (float64), by index
        self._spilled: RawParts = {}
        self._buffered = 0
        self._errors: deque[str] = deque(maxlen=MAX_ERRORS_PER_INTERVAL)
        self._ratelimit: tuple[tuple[str, str], ...] = ()
        self._probes: list[tuple[int, str | None]] = []
        self._users: dict[int, list[int]] = {}  # a closed loop's stream -> [output tokens, requests] done ok

    def _push(self, key: str, value: float) -> None:
        bucket = self._values.get(key)
        if bucket is None:
            self._values[key] = [value]
        else:
            bucket.append(value)

    def _measure(self, result: RequestResult, measured: tuple[Measure, ...]) -> None:
        """Each metric's value of ``result`` (the ones it has), and its class splits."""
        push = self._push
        for name, value_of, splits in measured:
            value = value_of(result)
            if value is None:
                continue
            push(name, value)
            for split in splits:
                if split == "cache":
                    if result.cache_class is not None:
                        push(f"{name}|cache:{result.cache_class}", value)
                elif result.bucket != DEFAULT_BUCKET:
                    push(f"{name}|bucket:{result.bucket}", value)

    def _success(self, result: RequestResult) -> None:
        """A success's metrics, its chunk times for ITL, and whether it called a tool or reasoned."""
        self._measure(result, _OK())
        if len(result.chunk_times_ns) >= 2:
            itl = self._itl
            itl.append((result.chunk_times_ns, result.chunk_tokens, result.output_tokens))
            if len(itl) >= ITL_BATCH:
                self.fold_itl()
        counters = self._counters
        if result.first_tool_ns is not None:
            counters["tool_calls"] = counters.get("tool_calls", 0) + 1
            counters["tool_tokens"] = counters.get("tool_tokens", 0) + result.tool_tokens
        if result.reasoned:
            counters["reasoned"] = counters.get("reasoned", 0) + 1
            counters["reasoning_tokens"] = counters.get("reasoning_tokens", 0) + result.reasoning_tokens

    def record(self, result: RequestResult) -> None:
        counters = self._counters
        if result.ratelimit:
            self._ratelimit = result.ratelimit  # the latest answer's limits stand for the interval
        self._measure(result, _SENT())
        if result.input_tokens is not None:
            counters["input_tokens"] = counters.get("input_tokens", 0) + result.input_tokens
            counters["input_reported"] = counters.get("input_reported", 0) + 1  # usage told its prompt size
        if result.cached_tokens:
            counters["cached_tokens"] = counters.get("cached_tokens", 0) + result.cached_tokens
        outcome = result.outcome
        if result.probe >= 0 and outcome is not Outcome.CANCELLED:  # an answer probe (analysis/quality.py)
            self._probes.append((result.probe, probe_text(result, PROBE_TEXT_LIMIT)))  # None: it failed
        if self.slo is not None:
            counters["judged"] = counters.get("judged", 0) + 1  # goodput is known (0 if none was good)
        if outcome is Outcome.OK:
            counters["ok"] = counters.get("ok", 0) + 1
            counters["output_tokens"] = counters.get("output_tokens", 0) + result.output_tokens
            if result.user >= 0:  # a closed loop's stream: its rate read per stream too (metrics.slices)
                done = self._users.setdefault(result.user, [0, 0])
                done[0] += result.output_tokens
                done[1] += 1
            if self._judged is not None and _good(self._judged, result):
                counters["good"] = counters.get("good", 0) + 1
                counters["good_tokens"] = counters.get("good_tokens", 0) + result.output_tokens
            if not result.tokens_exact:
                counters["approx_tokens"] = counters.get("approx_tokens", 0) + 1
            self._success(result)
        elif outcome is Outcome.ERROR:
            kind = result.error_kind.value if result.error_kind is not None else "other"
            key = "err:" + kind
            counters[key] = counters.get(key, 0) + 1
            message = result.error_message.strip().replace("\n", " ")
            self._errors.append(f"{kind}: {message[:MAX_ERROR_TEXT]}" if message else kind)
        else:
            counters["cancelled"] = counters.get("cancelled", 0) + 1
        self._buffered += 8  # values pushed per result, about; chunk times wait in batches of ITL_BATCH
        if self._buffered > SPILL_AT:
            self._spill()

    def record_replica(self, keys: ReplicaKeys, result: RequestResult) -> None:
        """Count ``result`` (already ``record``ed) under the replica that served it as well: its outcome,
        its output tokens and its TTFT (``loadgen.metrics.replicas``)."""
        counters = self._counters
        outcome = result.outcome
        if outcome is Outcome.OK:
            counters[keys.ok] = counters.get(keys.ok, 0) + 1
            counters[keys.output_tokens] = counters.get(keys.output_tokens, 0) + result.output_tokens
            if result.first_token_ns is not None:
                self._push(keys.ttft, result.first_token_ns - result.intended_ns)
        elif outcome is Outcome.ERROR:
            counters[keys.errors] = counters.get(keys.errors, 0) + 1
        else:
            counters[keys.cancelled] = counters.get(keys.cancelled, 0) + 1

    @staticmethod
    def live_correction(result: RequestResult) -> int:
        """What to add to the live token counter when ``result`` completes.

        While streaming the client counts ``len(token_ids)`` (or 1) per content chunk; at completion this
        replaces the estimate with usage's count for a success and removes it for a failure, so the live
        counter sums to the successful requests' output tokens.
        """
        live = sum(result.chunk_tokens) if result.chunk_tokens else len(result.chunk_times_ns)
        if result.outcome is Outcome.OK:
            return result.output_tokens - live
        return -live

    def _raw_parts(self) -> RawParts:
        """Turn buffered source values (ns, tok/s, tokens) into integer histogram units."""
        return dict(self._raw_parts_by_key())

    def _raw_parts_by_key(self) -> Iterator[tuple[str, list[tuple[IntArray, IntArray | None]]]]:
        """``_raw_parts`` a key at a time (each key's conversion done as it is reached); the buffers are
        handed over at once, so values pushed meanwhile start new ones."""
        spilled, values = self._spilled, self._values
        self._spilled, self._values = {}, {}
        for key in dict.fromkeys([*spilled, *values]):
            parts = spilled.get(key, [])
            raw = values.get(key)
            if raw is not None:
                parts.append((_integer_units(key, raw), None))
            yield key, parts

    def fold_itl(self) -> None:
        """The waiting requests' per-token ITL into the interval's dense counts (values outside the layout
        to ``oor:itl_ms``): one vectorized pass over at most ``ITL_BATCH`` requests."""
        items, self._itl = self._itl, []
        if not items:
            return
        values, counts = _itl_samples(items)
        per_token = _PER_TOKEN()
        layout = spec_for(per_token).layout
        index, bad = layout.index_of(values)
        if bad.any():
            oor = "oor:" + per_token
            self._counters[oor] = self._counters.get(oor, 0) + int(counts[bad].sum())
            index, counts = index[~bad], counts[~bad]
        add = np.bincount(index, weights=counts.astype(np.float64), minlength=layout.counts_len)
        if self._itl_dense is None:
            self._itl_dense = add
        else:
            self._itl_dense += add

    def _fold(self, key: str, parts: list[tuple[IntArray, IntArray | None]]) -> SparseCounts | None:
        """One key's buffered parts as sparse counts; values outside its layout go to ``oor:<metric>``."""
        sparse, out_of_range = _sparse(parts, spec_for(key).layout)
        if out_of_range:
            oor = "oor:" + key.split("|", 1)[0]
            self._counters[oor] = self._counters.get(oor, 0) + out_of_range
        return sparse

    def _spill(self) -> None:
        """Fold buffers into sparse counts (still one vectorized pass), keeping memory bounded."""
        spilled: RawParts = {}
        for key, parts in self._raw_parts().items():
            sparse = self._fold(key, parts)
            if sparse is not None:
                # kept as (lowest equivalent value, count): take() indexes them again to the same slots
                index, count = sparse
                lowest_eq = spec_for(key).layout.lowest_eq
                spilled[key] = [(lowest_eq[index.astype(np.int64)], count.astype(np.int64))]
        self._spilled = spilled
        self._buffered = 0

    def take(self, t0_ns: int, t1_ns: int, **gauges: Any) -> IntervalDelta:
        """The interval's delta; the recorder starts the next interval empty. ``gauges``: as ``take_steps``."""
        steps = self.take_steps(t0_ns, t1_ns, **gauges)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def take_steps(
        self,
        t0_ns: int,
        t1_ns: int,
        live_tokens: int = 0,
        in_flight: int = 0,
        queued: int = 0,
        sent: int = 0,
        health: Mapping[str, float] | None = None,
        backing_off: int = 0,
    ) -> Generator[None, None, IntervalDelta]:
        """``take`` in pieces: the interval ends now (this recorder starts the next one empty, at once), and
        the returned generator encodes what it held one histogram per ``next``, returning the delta. A worker
        runs the pieces on its loop between socket reads, so that no read waits for a whole
        shipment (``loadgen.run.shipping.WindowBook``); results recorded meanwhile belong to the next
        interval. The delta is the one ``take`` would have made now, bit for bit."""
        part = self._detach()
        gauges = (live_tokens, in_flight, queued, sent, dict(health) if health else {}, backing_off)
        return part._encode(t0_ns, t1_ns, *gauges)

    def _detach(self) -> Recorder:
        """The interval so far, moved into a recorder of its own; this one starts the next interval empty."""
        part = Recorder.__new__(Recorder)
        part.__dict__.update(self.__dict__)
        self._reset()
        return part

    def _encode(
        self,
        t0_ns: int,
        t1_ns: int,
        live_tokens: int,
        in_flight: int,
        queued: int,
        sent: int,
        health: dict[str, float],
        backing_off: int,
    ) -> Generator[None, None, IntervalDelta]:
        hists: dict[str, SparseCounts] = {}
        for key, parts in self._raw_parts_by_key():
            sparse = self._fold(key, parts)
            if sparse is not None:
                hists[key] = sparse
            yield
        self.fold_itl()
        if self._itl_dense is not None:
            yield
            per_token = _PER_TOKEN()
            itl = _compact(self._itl_dense, spec_for(per_token).layout)
            if itl is not None:
                hists[per_token] = itl
        return IntervalDelta(
            t0_ns=t0_ns,
            t1_ns=t1_ns,
            worker_id=self.worker_id,
            counters=dict(self._counters),
            hists=hists,
            live_tokens=live_tokens,
            in_flight=in_flight,
            queued=queued,
            sent=sent,
            health=health,
            backing_off=backing_off,
            recent_errors=tuple(self._errors),
            ratelimit=self._ratelimit,
            probes=tuple(self._probes),
            users={user: (done[0], done[1]) for user, done in self._users.items()},
        )
