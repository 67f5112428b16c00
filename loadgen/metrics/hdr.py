"""The HDR histogram layout, read in bulk: the only module that touches ``hdrh``'s internals.

Owns the bucket arithmetic of ``hdrh.histogram.HdrHistogram`` (3 significant digits) as numpy tables, the
metric specs (integer unit, range, display unit of each histogram key, from ``loadgen.measures``), the dense histogram the
controller sums into, reading percentiles and drawing bins from counts in one pass, and the base64 codec
of run records.

Units inside a histogram are integers: microseconds for ttft/itl/e2e/lag, centi-tokens/s for decode speed,
tokens for the per-request token counts. ``hdrh``'s ``record_value`` costs ~2.5 µs per call, so values are
indexed in one numpy pass with the same arithmetic as ``HdrHistogram._counts_index_for`` (a test checks
both agree value for value), and percentiles come from one cumulative sum over the counts (not one scan
per percentile). The attributes read here (``unit_magnitude``, ``counts``, ``set_internal_tacking_values``)
are why ``hdrhistogram`` is pinned below its next minor.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

from loadgen.measures import US_PER_HOUR, derived
from loadgen.snapshot import BUCKETS, HistogramView, Percentiles

__all__ = [
    "PCT_POINTS",
    "US_PER_HOUR",
    "DenseHistogram",
    "Layout",
    "MetricSpec",
    "decode_histogram",
    "hdr_counts",
    "hdr_layout",
    "layout_for",
    "percentiles_from_hdr",
    "spec_for",
    "cumulative_at",
    "fixed_buckets",
    "summarize",
    "view_from_hdr",
]

IntArray = npt.NDArray[np.int64]
CountArray = npt.NDArray[np.integer]
Bins = tuple[tuple[float, float, int], ...]

SIGNIFICANT_DIGITS = 3
# Percentiles reported for every metric, in the order of the Percentiles fields.
PCT_POINTS: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
N_BINS = 40


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
def hdr_layout(lowest: int, highest: int, digits: int = SIGNIFICANT_DIGITS) -> Layout:
    """The layout of ``HdrHistogram(lowest, highest, digits)``, built once per parameter set."""
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
class MetricSpec:
    """What one histogram holds: its integer range and how its integers read in display units."""

    lowest: int
    highest: int
    display_div: float  # stored integer units per display unit
    unit: str

    @property
    def layout(self) -> Layout:
        return hdr_layout(self.lowest, self.highest, SIGNIFICANT_DIGITS)


# Each metric's spec, from the catalogue (``loadgen.measures``).
_specs = derived(
    lambda metrics, _clauses: {
        m.name: MetricSpec(m.lowest, m.highest, m.display_div, m.unit) for m in metrics
    }
)


def spec_for(key: str) -> MetricSpec:
    """Histogram keys are a metric name, optionally ``|class`` (``ttft_ms|cache:hit``)."""
    return _specs()[key.split("|", 1)[0]]


def layout_for(key: str) -> Layout:
    return spec_for(key).layout


def summarize(
    counts: CountArray, layout: Layout, div: float, with_bins: bool = True
) -> tuple[Percentiles, Bins]:
    """Percentiles (and drawing bins unless ``with_bins`` is false) of dense counts, in display units."""
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


def cumulative_at(
    counts: CountArray, layout: Layout, div: float, bounds: tuple[float, ...]
) -> tuple[tuple[float, int], ...]:
    """How many values lie at or below each bound (display units; a value counts at its HDR bucket's
    median equivalent): monotone in the counts, so a histogram that only grows gives counters that only grow."""
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        return tuple((b, 0) for b in bounds)
    cum = np.cumsum(counts[nonzero].astype(np.int64))
    values = layout.median_eq[nonzero].astype(np.float64) / div
    where = np.searchsorted(values, np.asarray(bounds, dtype=np.float64), side="right")
    return tuple((b, int(cum[i - 1]) if i > 0 else 0) for b, i in zip(bounds, where.tolist(), strict=True))


def _bins(nonzero: IntArray, c: IntArray, layout: Layout, div: float, lo_raw: int, hi_raw: int) -> Bins:
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


def hdr_counts(hist: HdrHistogram) -> npt.NDArray[np.uint64]:
    """A numpy view (no copy) on an ``HdrHistogram``'s counts array."""
    return np.ctypeslib.as_array(hist.counts)


class DenseHistogram:
    """A dense HDR histogram: an ``HdrHistogram`` with a numpy view on its counts for vectorized adds."""

    __slots__ = ("key", "spec", "hdr", "counts")

    def __init__(self, key: str) -> None:
        self.key = key
        self.spec = spec_for(key)
        self.hdr = self.spec.layout.new_hdr()
        self.counts = hdr_counts(self.hdr)

    def add_hdr(self, hist: HdrHistogram) -> None:
        """Add a decoded histogram of the same layout (a record's) to these counts."""
        self.counts += hdr_counts(hist)

    def encode(self) -> str:
        """Base64 HDR V2, what hdrh / HdrHistogram tools read."""
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


def decode_histogram(b64: str) -> HdrHistogram:
    """Decode one histogram of a run record (base64 HDR V2, as ``Accumulator.encoded`` writes it)."""
    return HdrHistogram.decode(b64)


def view_from_hdr(hist: HdrHistogram, key: str) -> HistogramView:
    """Percentiles and drawing bins, in display units, of a decoded record histogram."""
    spec = spec_for(key)
    layout = spec.layout
    counts = hdr_counts(hist)
    if hist.counts_len != layout.counts_len:
        raise ValueError(f"histogram {key!r}: layout {hist.counts_len} counts, expected {layout.counts_len}")
    pct, bins = summarize(counts, layout, spec.display_div)
    return HistogramView(metric=key, unit=spec.unit, pct=pct, bins=bins)


def fixed_buckets(key: str, counts: CountArray) -> tuple[tuple[float, int], ...]:
    """``HistogramView.le`` of one histogram: cumulative counts at its metric's fixed ``BUCKETS`` (none
    for a class split or a metric without buckets)."""
    bounds = BUCKETS.get(key)
    if bounds is None:
        return ()
    spec = spec_for(key)
    return cumulative_at(counts, spec.layout, spec.display_div, bounds)


def percentiles_from_hdr(hist: HdrHistogram, key: str) -> Percentiles:
    return view_from_hdr(hist, key).pct
