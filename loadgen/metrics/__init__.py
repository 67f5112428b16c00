"""Latency and throughput metrics: HDR histograms filled in the workers, merged into windows in the controller.

The path from ``RequestResult`` to ``WindowStats``, in three modules:

* ``hdr`` — the HDR layout as numpy tables, metric specs, dense histograms, percentiles and bins read in
  one pass, the record codec (the only module touching ``hdrh``'s internals).
* ``recorder`` — the worker side: ``Recorder`` folds results, ``take()`` ships an ``IntervalDelta``.
* ``windows`` — the controller side: ``Accumulator`` sums deltas, ``RollingWindow`` keeps the last N s.

The names below are the package's public surface; ``from loadgen.metrics import Accumulator`` keeps working.
"""

from __future__ import annotations

from loadgen.metrics.hdr import (
    PCT_POINTS,
    US_PER_HOUR,
    DenseHistogram,
    Layout,
    MetricSpec,
    decode_histogram,
    hdr_counts,
    hdr_layout,
    layout_for,
    percentiles_from_hdr,
    spec_for,
    view_from_hdr,
)
from loadgen.metrics.recorder import SPILL_AT, IntervalDelta, Recorder
from loadgen.metrics.windows import Accumulator, RollingWindow

__all__ = [
    "PCT_POINTS",
    "SPILL_AT",
    "US_PER_HOUR",
    "Accumulator",
    "DenseHistogram",
    "IntervalDelta",
    "Layout",
    "MetricSpec",
    "Recorder",
    "RollingWindow",
    "decode_histogram",
    "hdr_counts",
    "hdr_layout",
    "layout_for",
    "percentiles_from_hdr",
    "spec_for",
    "view_from_hdr",
]
