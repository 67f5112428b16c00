"""Prometheus text from a server runtime and the DCGM exporter, turned into runtime-neutral ``Reading`` s.

Parsing is prometheus_client's (``text_string_to_metric_families``); which metric names mean what is each
runtime's (``loadgen.runtimes``: ``Runtime.metrics``), read here by one reader for all. Names are matched on
samples, not families, so an exposition without ``# TYPE`` lines (where the parser cannot strip ``_total``)
reads the same. DCGM names from NVIDIA/dcgm-exporter ``etc/default-counters.csv``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from loadgen.runtimes import METRIC_RUNTIMES, MetricNames, RuntimeName, lookup
from loadgen.snapshot import GPUSample
from loadgen.telemetry.reading import CumulativeHistogram, Reading, SourceError, add_histograms

# Labels that tell apart copies of the same number (every TP/PP rank may publish the scheduler's
# gauges); samples that differ only in these are one series, not several to add up.
REPLICA_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "attn_cp_rank"})

PREFIXES: dict[RuntimeName, str] = {
    r.name: r.metrics.prefix for r in METRIC_RUNTIMES if r.metrics is not None
}
DCGM_PREFIX = "DCGM_FI_"


@dataclass(frozen=True, slots=True)
class Sample:
    name: str  # with any ``_total`` kept; histogram parts keep ``_bucket``/``_sum``/``_count``
    labels: Mapping[str, str]
    value: float


def parse_samples(text: str, source: str = "metrics") -> list[Sample]:
    """Every sample in an exposition. Garbage raises ``SourceError`` naming ``source``."""
    try:
        return [
            Sample(s.name, s.labels, float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        line = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise SourceError(f"not Prometheus text from {source}: {line}") from None


def detect_runtime(samples: Iterable[Sample]) -> RuntimeName | None:
    """The runtime whose names the samples carry; with two runtimes' names (a proxy exporting two servers),
    the first of ``loadgen.runtimes.RUNTIMES``."""
    for name, prefix in PREFIXES.items():
        if any(s.name.startswith(prefix) for s in samples):
            return name
    return None


def has_dcgm(samples: Iterable[Sample]) -> bool:
    return any(s.name.startswith(DCGM_PREFIX) for s in samples)


DCGM_FIELDS = {
    "DCGM_FI_DEV_FB_USED": "used",  # MiB
    "DCGM_FI_DEV_FB_FREE": "free",  # MiB
    "DCGM_FI_DEV_FB_RESERVED": "reserved",  # MiB, newer exporters
    "DCGM_FI_DEV_FB_TOTAL": "total",  # MiB, when a custom counters file asks for it
    "DCGM_FI_DEV_GPU_UTIL": "util",  # %
    "DCGM_FI_DEV_POWER_USAGE": "power",  # W
}

# --- helpers ---------------------------------------------------------------------------------------


def _base(name: str) -> str:
    if name.endswith("_total"):
        return name[:-6]
    return name


def _finite(v: float) -> bool:
    return not (math.isnan(v) or math.isinf(v))


def _series_key(labels: Mapping[str, str], drop: frozenset[str] = frozenset()) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in REPLICA_LABELS and k not in drop))


def _combine(samples: list[Sample], how: str) -> float | None:
    """One number from a metric's series: copies across ranks collapse (max), distinct series add/average."""
    groups: dict[tuple, float] = {}
    for s in samples:
        if not _finite(s.value):
            continue
        key = _series_key(s.labels)
        groups[key] = max(groups.get(key, s.value), s.value)
    if not groups:
        return None
    values = list(groups.values())
    if how == "mean":
        return sum(values) / len(values)
    if how == "max":
        return max(values)
    return sum(values)


class _Index:
    """Samples grouped by base name, and histograms assembled from their ``_bucket``/``_sum`` parts."""

    def __init__(self, samples: Iterable[Sample]) -> None:
        self.plain: dict[str, list[Sample]] = defaultdict(list)
        buckets: dict[str, dict[tuple, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
        sums: dict[str, dict[tuple, float]] = defaultdict(dict)
        for s in samples:
            if s.name.endswith("_created"):
                continue
            if s.name.endswith("_bucket") and "le" in s.labels:
                try:
                    le = float(s.labels["le"])
                except ValueError:
                    continue
                buckets[s.name[:-7]][_series_key(s.labels, frozenset({"le"}))].append((le, s.value))
            elif s.name.endswith("_sum"):
                sums[s.name[:-4]][_series_key(s.labels)] = s.value
                self.plain[s.name].append(s)
            else:
                self.plain[_base(s.name)].append(s)
        self.histograms: dict[str, CumulativeHistogram] = {}
        for base, series in buckets.items():
            total: CumulativeHistogram | None = None
            for key, pairs in series.items():
                pairs.sort()
                h = CumulativeHistogram(
                    tuple(b for b, _ in pairs), tuple(c for _, c in pairs), sums[base].get(key, 0.0)
                )
                if not h.bounds or not math.isinf(h.bounds[-1]):
                    continue  # a histogram without +Inf is malformed; skip it rather than guess
                total = h if total is None else (add_histograms(total, h) or total)
            if total is not None:
                self.histograms[base] = total

    def gauge(self, names: tuple[str, ...], how: str) -> float | None:
        for name in names:
            if name in self.plain:
                value = _combine(self.plain[name], how)
                if value is not None:
                    return value
        return None

    def counter(self, names: tuple[str, ...]) -> float | None:
        return self.gauge(names, "sum")

    def histogram(self, names: tuple[str, ...]) -> CumulativeHistogram | None:
        for name in names:
            if name in self.histograms:
                return self.histograms[name]
        return None

    def breakdown(self, name: str, label: str) -> dict[str, float]:
        by: dict[str, list[Sample]] = defaultdict(list)
        for s in self.plain.get(name, ()):
            if label in s.labels:
                by[s.labels[label]].append(s)
        out = {}
        for value, samples in by.items():
            v = _combine(samples, "sum")
            if v is not None:
                out[value] = v
        return out


def _read(
    ix: _Index, names: MetricNames
) -> tuple[dict[str, float], dict[str, float], dict[str, CumulativeHistogram], dict]:
    """A runtime's gauges, counters, histograms and breakdowns by its name tables, then its own last step."""
    gauges = {k: v for k, (names_, how) in names.gauges.items() if (v := ix.gauge(names_, how)) is not None}
    counters = {k: v for k, names_ in names.counters.items() if (v := ix.counter(names_)) is not None}
    hists = {k: h for k, names_ in names.histograms.items() if (h := ix.histogram(names_)) is not None}
    for prefix, (name, label, kind) in names.breakdowns.items():
        target = gauges if kind == "gauge" else counters
        for value, v in ix.breakdown(name, label).items():
            target[f"{prefix}.{value}"] = v
    info: dict[str, object] = {}
    if names.finish is not None:
        names.finish(ix, gauges, counters, info)
    return gauges, counters, hists, info


def dcgm_gpus(samples: Iterable[Sample]) -> tuple[tuple[GPUSample, ...], dict[str, object]]:
    """Per-GPU samples from DCGM exporter names (``gpu`` label = index, ``modelName`` = name)."""
    per: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    names: dict[tuple[str, str], str] = {}
    info: dict[str, object] = {}
    for s in samples:
        field = DCGM_FIELDS.get(s.name)
        if field is None:
            continue
        key = (s.labels.get("Hostname", ""), s.labels.get("gpu", s.labels.get("device", "0")))
        if _finite(s.value):
            per[key][field] = s.value
        if s.labels.get("modelName"):
            names[key] = s.labels["modelName"]
        driver = s.labels.get("DCGM_FI_DRIVER_VERSION") or s.labels.get("driver_version")
        if driver:
            info.setdefault("driver_version", driver)
    hosts = {host for host, _ in per}
    gpus = []
    for pos, key in enumerate(sorted(per, key=lambda k: (k[0], _int_or(k[1], 0)))):
        f = per[key]
        used, free = f.get("used"), f.get("free")
        total = f.get("total")
        if total is None and used is not None and free is not None:
            total = used + free + f.get("reserved", 0.0)
        index = _int_or(key[1], pos) if len(hosts) <= 1 else pos
        gpus.append(
            GPUSample(
                index=index,
                name=names.get(key, ""),
                mem_used_mib=used,
                mem_total_mib=total,
                util_pct=f.get("util"),
                power_w=f.get("power"),
            )
        )
    return tuple(gpus), info


def _int_or(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def reading_from_samples(
    samples: list[Sample],
    t_ns: int,
    *,
    runtime: RuntimeName | None = None,
    server: bool = True,
    gpus: bool = True,
) -> Reading:
    """A Reading from parsed samples. ``runtime=None`` detects it from the metric prefixes."""
    rt = runtime or (detect_runtime(samples) if server else None)
    gauges: dict[str, float] = {}
    counters: dict[str, float] = {}
    hists: dict[str, CumulativeHistogram] = {}
    info: dict[str, object] = {}
    known = lookup(rt) if server else None
    if known is not None and known.metrics is not None:
        ix = _Index(s for s in samples if s.name.startswith(known.metrics.prefix))
        gauges, counters, hists, info = _read(ix, known.metrics)
    gpu_samples: tuple[GPUSample, ...] | None = None
    if gpus and has_dcgm(samples):
        gpu_samples, gpu_info = dcgm_gpus(samples)
        info.update(gpu_info)
    return Reading(
        t_ns=t_ns,
        runtime=rt if (gauges or counters or hists) else None,
        gauges=gauges,
        counters=counters,
        histograms=hists,
        gpus=gpu_samples,
        info=info,
    )


def parse_exposition(
    text: str, t_ns: int = 0, *, runtime: RuntimeName | None = None, source: str = "metrics"
) -> Reading:
    """Parse a /metrics body into a Reading (server metrics and any DCGM GPU metrics)."""
    return reading_from_samples(parse_samples(text, source), t_ns, runtime=runtime)
