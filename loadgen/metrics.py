"""Latency and throughput metrics: HDR histograms filled in the workers, merged into windows in the controller.

Owns the path from ``RequestResult`` to ``WindowStats``:

* ``Recorder`` (worker side) folds results into counters and per-interval value buffers, and every
  ~250 ms ``take()`` turns them into a small picklable ``IntervalDelta``.
* ``Accumulator`` (controller side) sums deltas into HDR histograms (the step window, the run) and reads
  percentiles and drawing bins from them; ``RollingWindow`` keeps the last N seconds.
* ``decode_histogram`` / ``view_from_hdr`` read the base64 HDR histograms stored in run records.

Every histogram uses the HdrHistogram layout (``hdrh.histogram.HdrHistogram``, 3 significant digits) in
integer units: microseconds for ttft/itl/e2e/lag, centi-tokens/s for decode speed, tokens for the
per-request token counts. The pure-Python ``record_value`` costs ~2.5 µs per call and one request can bring
hundreds of ITL samples, so values are buffered per interval and indexed in one numpy pass with the same
arithmetic as ``HdrHistogram._counts_index_for`` (a test checks both agree value for value). Values that
fall outside a layout (negative, or past the top) are counted under ``oor:<metric>``, never dropped
silently. Percentiles come from one cumulative sum over the counts (not one scan per percentile).

Latency histograms hold successful requests only; the schedule lag holds every request that was sent.
"""

from __future__ import annotations

import functools
import math
import pickle
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

from loadgen.snapshot import EMPTY, METRICS, HistogramView, Percentiles, WindowStats
from loadgen.types import Outcome, RequestResult

__all__ = [
    "Accumulator",
    "IntervalDelta",
    "Layout",
    "Recorder",
    "RollingWindow",
    "decode_histogram",
    "layout_for",
    "percentiles_from_hdr",
    "view_from_hdr",
]

IntArray = npt.NDArray[np.int64]
_SparseCounts = tuple[npt.NDArray[np.unsignedinteger[Any]], npt.NDArray[np.unsignedinteger[Any]]]

SIGNIFICANT_DIGITS = 3
US_PER_HOUR = 3_600_000_000
# Percentiles reported for every metric, in the order of the Percentiles fields.
PCT_POINTS: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
N_BINS = 40
MAX_ERRORS_PER_INTERVAL = 5
# Past this many buffered values a Recorder folds its buffers into sparse counts, so that a worker that is
# never asked for a delta (a script, a stalled controller) stays bounded in memory.
SPILL_AT = 65_536
# Class-split histograms: (metric, class key). Bucket "default" is the no-bucket case and would only
# repeat the overall figures.
DEFAULT_BUCKET = "default"


# ----------------------------------------------------------------------------------------------------------
# Layouts: the HdrHistogram index arithmetic, vectorized


@dataclass(frozen=True, eq=False)
class Layout:
    """One HDR bucket layout with per-index value tables (lowest / highest / median equivalent value)."""

    lowest: int
    highest: int
    digits: int
    unit_magnitude: int
    half_count_magnitude: int
    half_count: int
    sub_bucket_mask: int
    counts_len: int
    lowest_eq: IntArray = field(repr=False)
    highest_eq: IntArray = field(repr=False)
    median_eq: IntArray = field(repr=False)

    def new_hdr(self) -> HdrHistogram:
        return HdrHistogram(self.lowest, self.highest, self.digits)

    def index_of(self, values: IntArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """Counts-array index of each value, as ``HdrHistogram._counts_index_for``; and an out-of-range mask."""
        values = np.asarray(values, dtype=np.int64)
        # float64 holds integers exactly below 2**53, which frexp needs to give the exact bit length
        bad = (values < 0) | (values >= (1 << 52))
        safe = np.where(bad, 0, values)
        _, bit_length = np.frexp((safe | self.sub_bucket_mask).astype(np.float64))
        bucket = bit_length.astype(np.int64) - self.unit_magnitude - (self.half_count_magnitude + 1)
        sub_bucket = safe >> (bucket + self.unit_magnitude)
        index = ((bucket + 1) << self.half_count_magnitude) + sub_bucket - self.half_count
        bad |= index >= self.counts_len
        return np.where(bad, 0, index), bad


@functools.cache
def _layout(lowest: int, highest: int, digits: int) -> Layout:
    # Take the parameters from hdrh itself so the layout cannot drift from the codec's.
    h = HdrHistogram(lowest, highest, digits)
    unit, half_mag = h.unit_magnitude, h.sub_bucket_half_count_magnitude
    index = np.arange(h.counts_len, dtype=np.int64)
    bucket = (index >> half_mag) - 1
    sub = (index & (h.sub_bucket_half_count - 1)) + h.sub_bucket_half_count
    first = bucket < 0
    sub = np.where(first, sub - h.sub_bucket_half_count, sub)
    bucket = np.where(first, 0, bucket)
    lowest_eq = sub << (bucket + unit)
    _, bit_length = np.frexp((lowest_eq | h.sub_bucket_mask).astype(np.float64))
    value_bucket = bit_length.astype(np.int64) - unit - (half_mag + 1)
    size = np.left_shift(np.int64(1), unit + value_bucket)
    return Layout(
        lowest=lowest,
        highest=highest,
        digits=digits,
        unit_magnitude=unit,
        half_count_magnitude=half_mag,
        half_count=h.sub_bucket_half_count,
        sub_bucket_mask=h.sub_bucket_mask,
        counts_len=h.counts_len,
        lowest_eq=lowest_eq,
        highest_eq=lowest_eq + size - 1,
        median_eq=lowest_eq + (size >> 1),
    )


@dataclass(frozen=True, slots=True)
class _MetricSpec:
    lowest: int
    highest: int
    display_div: float  # stored integer units per display unit
    unit: str

    @property
    def layout(self) -> Layout:
        return _layout(self.lowest, self.highest, SIGNIFICANT_DIGITS)


_US = _MetricSpec(1, US_PER_HOUR, 1000.0, "ms")
_SPECS: dict[str, _MetricSpec] = {
    "ttft_ms": _US,
    "itl_ms": _US,
    "e2e_ms": _US,
    "lag_ms": _US,
    "decode_tok_s": _MetricSpec(1, 10**8, 100.0, "tok/s"),  # centi-tok/s
    "input_tokens": _MetricSpec(1, 10**8, 1.0, "tokens"),
    "output_tokens": _MetricSpec(1, 10**8, 1.0, "tokens"),
}


def _spec(key: str) -> _MetricSpec:
    """Histogram keys are a metric name, optionally ``|class`` (``ttft_ms|cache:hit``)."""
    return _SPECS[key.split("|", 1)[0]]


def layout_for(key: str) -> Layout:
    return _spec(key).layout


# ----------------------------------------------------------------------------------------------------------
# Reading counts: percentiles and bins in one pass


def _summarize(
    counts: npt.NDArray[Any], layout: Layout, div: float, with_bins: bool = True
) -> tuple[Percentiles, tuple[tuple[float, float, int], ...]]:
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        return Percentiles(), ()
    c = counts[nonzero].astype(np.int64)
    cum = np.cumsum(c)
    total = int(cum[-1])
    # Same target rule as HdrHistogram.get_target_count_at_percentile, so values match hdrh exactly.
    targets = [max(int(p * total / 100 + 0.5), 1) for p in PCT_POINTS]
    where = np.searchsorted(cum, targets, side="left")
    values = layout.highest_eq[nonzero[where]] / div
    mean = float(np.dot(c.astype(np.float64), layout.median_eq[nonzero].astype(np.float64))) / total / div
    lo_raw = int(layout.lowest_eq[nonzero[0]])
    hi_raw = int(layout.highest_eq[nonzero[-1]])
    pct = Percentiles(
        count=total,
        mean=mean,
        p50=float(values[0]),
        p90=float(values[1]),
        p95=float(values[2]),
        p99=float(values[3]),
        p999=float(values[4]),
        max=hi_raw / div,
        min=lo_raw / div,
    )
    return pct, _bins(nonzero, c, layout, div, lo_raw, hi_raw) if with_bins else ()


def _bins(
    nonzero: IntArray, c: IntArray, layout: Layout, div: float, lo_raw: int, hi_raw: int
) -> tuple[tuple[float, float, int], ...]:
    lo = max(lo_raw, 1)
    hi = hi_raw + 1
    if hi <= lo:
        return ((lo / div, hi / div, int(c.sum())),)
    # Bins narrower than the HDR resolution (~1/1000 relative) would leave a comb of empty bins.
    n = max(1, min(N_BINS, int(nonzero.size), int(math.log(hi / lo) / math.log1p(1 / 1000))))
    edges = np.geomspace(lo, hi, n + 1)
    mids = np.clip(layout.median_eq[nonzero].astype(np.float64), lo, hi)
    which = np.clip(np.searchsorted(edges, mids, side="right") - 1, 0, n - 1)
    sums = np.bincount(which, weights=c.astype(np.float64), minlength=n)
    scaled = edges / div
    return tuple((float(scaled[i]), float(scaled[i + 1]), int(sums[i])) for i in range(n))


def _hdr_counts(hist: HdrHistogram) -> npt.NDArray[np.uint64]:
    return np.ctypeslib.as_array(hist.counts)


def decode_histogram(b64: str) -> HdrHistogram:
    """Decode one histogram of a run record (base64 HDR V2, as ``Accumulator.encoded`` writes it)."""
    return HdrHistogram.decode(b64)


def view_from_hdr(hist: HdrHistogram, key: str) -> HistogramView:
    """Percentiles and drawing bins, in display units, of a decoded record histogram."""
    spec = _spec(key)
    layout = spec.layout
    counts = _hdr_counts(hist)
    if hist.counts_len != layout.counts_len:
        raise ValueError(f"histogram {key!r}: layout {hist.counts_len} counts, expected {layout.counts_len}")
    pct, bins = _summarize(counts, layout, spec.display_div)
    return HistogramView(metric=key, unit=spec.unit, pct=pct, bins=bins)


def percentiles_from_hdr(hist: HdrHistogram, key: str) -> Percentiles:
    return view_from_hdr(hist, key).pct


# ----------------------------------------------------------------------------------------------------------
# Worker side


@dataclass(frozen=True)  # no slots: pickling frozen slotted dataclasses breaks on early 3.10 releases
class IntervalDelta:
    """What one worker measured over [t0_ns, t1_ns): counters and sparse histogram counts.

    ``hists`` maps a histogram key to (counts-array indices, counts) as the smallest unsigned numpy
    integer types that hold them, sorted by index, non-empty only. ``live_tokens`` is the output tokens streamed in the interval, corrections of
    finished requests included (what the aggregate out tok/s is made of).
    """

    t0_ns: int
    t1_ns: int
    worker_id: int
    counters: Mapping[str, int]
    hists: Mapping[str, _SparseCounts]
    live_tokens: int = 0
    in_flight: int = 0
    queued: int = 0
    sent: int = 0
    health: Mapping[str, float] = EMPTY
    recent_errors: tuple[str, ...] = ()  # "kind: message", the last few of the interval

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
) -> tuple[_SparseCounts | None, int]:
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
    dense = np.bincount(index, weights=weight.astype(np.float64))
    nonzero = np.flatnonzero(dense)
    if nonzero.size == 0:
        return None, out_of_range
    counts = dense[nonzero]
    # the smallest integer types that hold them: a delta is pickled 4 times a second per worker
    index_type = np.uint16 if layout.counts_len <= 1 << 16 else np.uint32
    top = counts.max()
    count_type = np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.uint64
    return (nonzero.astype(index_type), counts.astype(count_type)), out_of_range


def _itl_samples(
    items: Sequence[tuple[tuple[int, ...], tuple[int, ...] | None, int]],
) -> tuple[IntArray, IntArray]:
    """Per-token ITL in µs and its count from each request's chunk times, in one vectorized pass.

    The gap before a chunk of k tokens is spread over its k tokens (value gap/k, count k). Tokens of the
    first chunk beyond the first token have no gap of their own and are not samples. A chunk with no token
    hands its gap on to the next chunk that has some.
    """
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
            chain.from_iterable(items[i][1] for i in exact),  # type: ignore[misc]
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


class Recorder:
    """Folds RequestResults inside a worker; ``take()`` ships and resets the interval's figures."""

    def __init__(self, worker_id: int = 0) -> None:
        self.worker_id = worker_id
        self._reset()

    def _reset(self) -> None:
        self._counters: dict[str, int] = {}
        self._values: dict[str, list[float]] = {}
        self._itl: list[tuple[tuple[int, ...], tuple[int, ...] | None, int]] = []
        self._spilled: dict[str, list[tuple[IntArray, IntArray | None]]] = {}
        self._buffered = 0
        self._errors: deque[str] = deque(maxlen=MAX_ERRORS_PER_INTERVAL)

    def _push(self, key: str, value: float) -> None:
        bucket = self._values.get(key)
        if bucket is None:
            self._values[key] = [value]
        else:
            bucket.append(value)

    def _latencies(self, result: RequestResult) -> None:
        push = self._push
        e2e = result.end_ns - result.intended_ns
        push("e2e_ms", e2e)
        ttft = result.ttft_ns
        if ttft is not None:
            push("ttft_ms", ttft)
        decode = result.decode_tok_s
        if decode is not None:
            push("decode_tok_s", decode)
        if len(result.chunk_times_ns) >= 2:
            self._itl.append((result.chunk_times_ns, result.chunk_tokens, result.output_tokens))
        if result.cache_class is not None:
            cls = "|cache:" + result.cache_class
            push("e2e_ms" + cls, e2e)
            if ttft is not None:
                push("ttft_ms" + cls, ttft)
        if ttft is not None and result.bucket != DEFAULT_BUCKET:
            push("ttft_ms|bucket:" + result.bucket, ttft)

    def record(self, result: RequestResult) -> None:
        counters = self._counters
        push = self._push
        if result.sent_ns > 0:
            push("lag_ms", result.sent_ns - result.intended_ns)
        if result.input_tokens is not None:
            counters["input_tokens"] = counters.get("input_tokens", 0) + result.input_tokens
        if result.cached_tokens:
            counters["cached_tokens"] = counters.get("cached_tokens", 0) + result.cached_tokens
        outcome = result.outcome
        if outcome is Outcome.OK:
            counters["ok"] = counters.get("ok", 0) + 1
            counters["output_tokens"] = counters.get("output_tokens", 0) + result.output_tokens
            if not result.tokens_exact:
                counters["approx_tokens"] = counters.get("approx_tokens", 0) + 1
            if result.input_tokens is not None:
                push("input_tokens", result.input_tokens)
            push("output_tokens", result.output_tokens)
            self._latencies(result)
        elif outcome is Outcome.ERROR:
            kind = result.error_kind.value if result.error_kind is not None else "other"
            key = "err:" + kind
            counters[key] = counters.get(key, 0) + 1
            message = result.error_message.strip().replace("\n", " ")
            self._errors.append(f"{kind}: {message[:200]}" if message else kind)
        else:
            counters["cancelled"] = counters.get("cancelled", 0) + 1
        self._buffered += 8 + len(result.chunk_times_ns)
        if self._buffered > SPILL_AT:
            self._spill()

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

    def _raw_parts(self) -> dict[str, list[tuple[IntArray, IntArray | None]]]:
        """Turn buffered source values (ns, tok/s, tokens) into integer histogram units."""
        parts = self._spilled
        self._spilled = {}
        for key, values in self._values.items():
            metric = key.split("|", 1)[0]
            arr = np.asarray(values, dtype=np.float64 if metric == "decode_tok_s" else np.int64)
            if metric == "decode_tok_s":
                ints = np.rint(arr * 100.0).astype(np.int64)
            elif metric.endswith("_ms"):
                ints = np.floor_divide(arr + 500, 1000)  # ns -> µs, rounded
            else:
                ints = arr
            parts.setdefault(key, []).append((ints, None))
        self._values = {}
        if self._itl:
            itl, itl_counts = _itl_samples(self._itl)
            parts.setdefault("itl_ms", []).append((itl, itl_counts))
            self._itl = []
        return parts

    def _spill(self) -> None:
        """Fold buffers into sparse counts (still one vectorized pass), keeping memory bounded."""
        spilled: dict[str, list[tuple[IntArray, IntArray | None]]] = {}
        for key, parts in self._raw_parts().items():
            layout = _spec(key).layout
            sparse, out_of_range = _sparse(parts, layout)
            if out_of_range:
                oor = "oor:" + key.split("|", 1)[0]
                self._counters[oor] = self._counters.get(oor, 0) + out_of_range
            if sparse is not None:
                # kept as (lowest equivalent value, count): take() indexes them again to the same slots
                index, count = sparse
                spilled[key] = [(layout.lowest_eq[index.astype(np.int64)], count.astype(np.int64))]
        self._spilled = spilled
        self._buffered = 0

    def take(
        self,
        t0_ns: int,
        t1_ns: int,
        live_tokens: int = 0,
        in_flight: int = 0,
        queued: int = 0,
        sent: int = 0,
        health: Mapping[str, float] | None = None,
    ) -> IntervalDelta:
        """The interval's delta; the recorder starts the next interval empty."""
        counters = self._counters
        hists: dict[str, _SparseCounts] = {}
        for key, parts in self._raw_parts().items():
            sparse, out_of_range = _sparse(parts, _spec(key).layout)
            if out_of_range:
                oor = "oor:" + key.split("|", 1)[0]
                counters[oor] = counters.get(oor, 0) + out_of_range
            if sparse is not None:
                hists[key] = sparse
        delta = IntervalDelta(
            t0_ns=t0_ns,
            t1_ns=t1_ns,
            worker_id=self.worker_id,
            counters=dict(counters),
            hists=hists,
            live_tokens=live_tokens,
            in_flight=in_flight,
            queued=queued,
            sent=sent,
            health=dict(health) if health else {},
            recent_errors=tuple(self._errors),
        )
        self._reset()
        return delta


# ----------------------------------------------------------------------------------------------------------
# Controller side


class _Hist:
    """A dense HDR histogram: an ``HdrHistogram`` with a numpy view on its counts for vectorized adds."""

    __slots__ = ("key", "spec", "hdr", "counts")

    def __init__(self, key: str) -> None:
        self.key = key
        self.spec = _spec(key)
        self.hdr = self.spec.layout.new_hdr()
        self.counts = _hdr_counts(self.hdr)

    def encode(self) -> str:
        counts = self.counts
        nonzero = np.flatnonzero(counts)
        if nonzero.size:
            # hdrh keeps its own total/min/max only through record_value; set them from the counts
            self.hdr.set_internal_tacking_values(
                int(nonzero[0]), int(nonzero[-1]), int(counts[nonzero].sum())
            )
        else:
            self.hdr.set_internal_tacking_values(-1, -1, 0)
        encoded: bytes = self.hdr.encode()
        return encoded.decode("ascii")


class Accumulator:
    """Sums interval deltas (from any number of workers) and reads WindowStats from the sums."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.live_tokens = 0
        self.sent = 0
        self.intervals = 0
        self.t0_ns: int | None = None
        self.t1_ns: int | None = None
        self._hists: dict[str, _Hist] = {}
        self.recent_errors: deque[str] = deque(maxlen=20)
        # latest gauges per worker: (t1_ns, in_flight, queued, health)
        self.workers: dict[int, tuple[int, int, int, Mapping[str, float]]] = {}

    def _hist(self, key: str) -> _Hist:
        hist = self._hists.get(key)
        if hist is None:
            hist = self._hists[key] = _Hist(key)
        return hist

    def add(self, delta: IntervalDelta) -> None:
        self._apply(delta, 1)
        self.recent_errors.extend(delta.recent_errors)
        known = self.workers.get(delta.worker_id)
        if known is None or known[0] <= delta.t1_ns:
            self.workers[delta.worker_id] = (delta.t1_ns, delta.in_flight, delta.queued, delta.health)
        self.t0_ns = delta.t0_ns if self.t0_ns is None else min(self.t0_ns, delta.t0_ns)
        self.t1_ns = delta.t1_ns if self.t1_ns is None else max(self.t1_ns, delta.t1_ns)

    def subtract(self, delta: IntervalDelta) -> None:
        """Remove a delta added before (rolling windows)."""
        self._apply(delta, -1)

    def _apply(self, delta: IntervalDelta, sign: int) -> None:
        counters = self.counters
        for name, value in delta.counters.items():
            counters[name] = counters.get(name, 0) + sign * value
        for key, (index, count) in delta.hists.items():
            counts = self._hist(key).counts
            if sign > 0:
                counts[index] += count  # indices are unique within a delta
            else:
                counts[index] -= count
        self.live_tokens += sign * delta.live_tokens
        self.sent += sign * delta.sent
        self.intervals += sign

    def merge(self, other: Accumulator) -> None:
        for name, value in other.counters.items():
            self.counters[name] = self.counters.get(name, 0) + value
        for key, hist in other._hists.items():
            self._hist(key).counts += hist.counts
        self.live_tokens += other.live_tokens
        self.sent += other.sent
        self.intervals += other.intervals
        self.recent_errors.extend(other.recent_errors)
        for worker, gauges in other.workers.items():
            known = self.workers.get(worker)
            if known is None or known[0] <= gauges[0]:
                self.workers[worker] = gauges
        if other.t0_ns is not None:
            self.t0_ns = other.t0_ns if self.t0_ns is None else min(self.t0_ns, other.t0_ns)
        if other.t1_ns is not None:
            self.t1_ns = other.t1_ns if self.t1_ns is None else max(self.t1_ns, other.t1_ns)

    @property
    def in_flight(self) -> int:
        return sum(g[1] for g in self.workers.values())

    @property
    def queued(self) -> int:
        return sum(g[2] for g in self.workers.values())

    @property
    def out_of_range(self) -> dict[str, int]:
        """Values that did not fit a histogram, per metric (should stay empty; shown as a warning)."""
        return {k[4:]: v for k, v in self.counters.items() if k.startswith("oor:") and v}

    def view(self, key: str) -> HistogramView:
        spec = _spec(key)
        hist = self._hists.get(key)
        if hist is None:
            return HistogramView(metric=key, unit=spec.unit, pct=Percentiles())
        pct, bins = _summarize(hist.counts, spec.layout, spec.display_div)
        return HistogramView(metric=key, unit=spec.unit, pct=pct, bins=bins)

    def pct(self, key: str) -> Percentiles:
        hist = self._hists.get(key)
        if hist is None:
            return Percentiles()
        spec = _spec(key)
        return _summarize(hist.counts, spec.layout, spec.display_div, with_bins=False)[0]

    def stats(self, window: str, duration_s: float) -> WindowStats:
        c = self.counters
        ok = c.get("ok", 0)
        input_tokens = c.get("input_tokens", 0)
        rate = duration_s > 0
        by_class: dict[str, dict[str, Percentiles]] = {}
        for key in sorted(self._hists):
            if "|" in key:
                metric, cls = key.split("|", 1)
                pct = self.pct(key)
                if pct.count:
                    by_class.setdefault(cls, {})[metric] = pct
        return WindowStats(
            window=window,
            duration_s=duration_s,
            ok=ok,
            errors={k[4:]: v for k, v in sorted(c.items()) if k.startswith("err:") and v},
            cancelled=c.get("cancelled", 0),
            input_tokens=input_tokens,
            output_tokens=c.get("output_tokens", 0),
            cached_tokens=c.get("cached_tokens", 0),
            out_tok_s=self.live_tokens / duration_s if rate else None,
            prefill_tok_s=input_tokens / duration_s if rate else None,
            req_s=ok / duration_s if rate else None,
            approx_tokens=c.get("approx_tokens", 0),
            hist={metric: self.view(metric) for metric in METRICS},
            by_class=by_class,
        )

    def encoded(self) -> dict[str, str]:
        """Every non-empty histogram as base64 HDR (V2, what hdrh / HdrHistogram tools read)."""
        return {key: hist.encode() for key, hist in sorted(self._hists.items()) if hist.counts.any()}


class RollingWindow:
    """The last ``seconds`` of deltas: added to a running sum, subtracted again once they are too old."""

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"rolling window must be positive, got {seconds}")
        self.seconds = seconds
        self.acc = Accumulator()
        self._ring: deque[IntervalDelta] = deque()

    def add(self, delta: IntervalDelta) -> None:
        self.acc.add(delta)
        self._ring.append(delta)

    def expire(self, now_ns: int) -> None:
        cutoff = now_ns - int(self.seconds * 1e9)
        if any(d.t1_ns <= cutoff for d in self._ring):
            keep: deque[IntervalDelta] = deque()
            for d in self._ring:
                if d.t1_ns <= cutoff:
                    self.acc.subtract(d)
                else:
                    keep.append(d)
            self._ring = keep

    def span_s(self) -> float:
        """Seconds covered by the deltas kept (shorter than ``seconds`` early in a run)."""
        if not self._ring:
            return 0.0
        return (max(d.t1_ns for d in self._ring) - min(d.t0_ns for d in self._ring)) / 1e9

    def stats(self, now_ns: int, duration_s: float | None = None) -> WindowStats:
        """The window's figures; rates over ``duration_s`` if given, else over the span of the kept deltas."""
        self.expire(now_ns)
        return self.acc.stats("rolling", self.span_s() if duration_s is None else duration_s)


# ----------------------------------------------------------------------------------------------------------
# Benchmark: python -m loadgen.metrics


def _synthetic_results(n: int, tokens: int, seed: int = 0) -> list[RequestResult]:
    rng = np.random.default_rng(seed)
    out: list[RequestResult] = []
    now = 1_000_000_000_000
    for i in range(n):
        intended = now + i * 5_000_000
        sent = intended + int(rng.integers(10_000, 200_000))
        first = sent + int(rng.lognormal(np.log(80e6), 0.4))
        gaps = rng.lognormal(np.log(12e6), 0.3, size=tokens - 1).astype(np.int64)
        chunks = (first, *(first + np.cumsum(gaps)).tolist())
        out.append(
            RequestResult(
                outcome=Outcome.OK,
                intended_ns=intended,
                sent_ns=sent,
                end_ns=chunks[-1] + 1_000_000,
                first_token_ns=first,
                last_token_ns=chunks[-1],
                chunk_times_ns=chunks,
                output_tokens=tokens,
                input_tokens=1000,
                tokens_exact=True,
                cache_class="hit" if i % 2 else "miss",
            )
        )
    return out


def _bench() -> None:
    for tokens in (16, 256):
        results = _synthetic_results(2000, tokens)
        rec = Recorder()
        t = time.perf_counter()
        for r in results:
            rec.record(r)
        t_record = time.perf_counter() - t
        t = time.perf_counter()
        delta = rec.take(0, 1)
        t_take = time.perf_counter() - t
        print(
            f"record: {tokens}-chunk results: {t_record / len(results) * 1e6:.2f} µs/result "
            f"+ take {t_take / len(results) * 1e6:.2f} µs/result (take of {len(results)} results {t_take * 1e3:.1f} ms)"
        )
    # a typical interval: 250 ms of a busy worker (50 finished requests of 256 tokens)
    results = _synthetic_results(50, 256, seed=1)
    rec = Recorder()
    for r in results:
        rec.record(r)
    t = time.perf_counter()
    delta = rec.take(0, 250_000_000)
    t_take = time.perf_counter() - t
    size_sparse = len(pickle.dumps(delta, protocol=pickle.HIGHEST_PROTOCOL))
    t = time.perf_counter()
    for _ in range(20):
        pickle.loads(pickle.dumps(delta, protocol=pickle.HIGHEST_PROTOCOL))
    t_pickle = (time.perf_counter() - t) / 20
    acc = Accumulator()
    acc.add(delta)
    t = time.perf_counter()
    encoded = acc.encoded()
    t_encode = time.perf_counter() - t
    size_hdr = sum(len(v) for v in encoded.values())
    steady = Accumulator()
    steady.add(delta)
    t = time.perf_counter()
    for _ in range(50):
        steady.add(delta)
    t_add_sparse = (time.perf_counter() - t) / 50
    t = time.perf_counter()
    for _ in range(5):
        target = Accumulator()
        for key, b64 in encoded.items():
            h = _Hist(key)
            h.counts += _hdr_counts(decode_histogram(b64))
            target._hists[key] = h
    t_add_hdr = (time.perf_counter() - t) / 5
    print(
        f"interval (50 results x 256 chunks, {len(delta.hists)} hists): take {t_take * 1e3:.2f} ms; "
        f"sparse pairs: {size_sparse} B pickled, pickle+unpickle {t_pickle * 1e3:.3f} ms, "
        f"controller add {t_add_sparse * 1e3:.3f} ms; "
        f"hdr encode(): {size_hdr} B base64, encode {t_encode * 1e3:.2f} ms, decode+add {t_add_hdr * 1e3:.2f} ms"
    )
    # snapshot: 3 windows with a few thousand results each
    windows = []
    for seed in range(3):
        acc = Accumulator()
        rec = Recorder()
        for r in _synthetic_results(3000, 64, seed=seed):
            rec.record(r)
        acc.add(rec.take(0, 1))
        windows.append(acc)
    t = time.perf_counter()
    n = 20
    for _ in range(n):
        for i, acc in enumerate(windows):
            acc.stats(("step", "rolling", "run")[i], 10.0)
    t_stats = (time.perf_counter() - t) / n
    print(f"snapshot: stats() for 3 windows (5 metrics + 2 class splits each): {t_stats * 1e3:.2f} ms")
    t = time.perf_counter()
    h = _layout(1, US_PER_HOUR, 3).new_hdr()
    for v in range(1000):
        h.record_value(1000 + v * 997)
    t_rv = (time.perf_counter() - t) / 1000
    t = time.perf_counter()
    h.get_percentile_to_value_dict(list(PCT_POINTS))
    t_pd = time.perf_counter() - t
    print(
        f"reference hdrh: record_value {t_rv * 1e6:.2f} µs, get_percentile_to_value_dict {t_pd * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    _bench()
