"""The simulator's /metrics: vLLM metric names from the engine's counters, plus DCGM-exporter GPU gauges.

Everything is read from the engine when scraped (a custom collector on a per-server ``CollectorRegistry``),
so the hot path only bumps plain integers and never touches prometheus_client.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from .model import GpuEngine

if TYPE_CHECKING:
    from .server import SimServer

_MIB = 1024 * 1024
_LABELS = ["engine", "model_name"]


class SimCollector:
    def __init__(self, server: SimServer) -> None:
        self.server = server
        self._busy_samples: deque[tuple[int, int]] = deque(maxlen=64)  # (monotonic ns, engine busy ns)

    def describe(self) -> list[Metric]:
        return []  # do not collect at registration time

    def _util_pct(self) -> float:
        engine = self.server.engine
        if engine.params.kind == "fixed":
            return 100.0 if engine.num_running else 0.0
        now = time.monotonic_ns()
        busy = engine.stats.busy_ns
        samples = self._busy_samples
        samples.append((now, busy))
        while len(samples) > 2 and now - samples[1][0] >= 1_000_000_000:
            samples.popleft()  # keep about a second of history, like DCGM's sampling window
        t0, b0 = samples[0]
        if now - t0 < 50_000_000:
            return 100.0 if engine.num_running else 0.0
        return max(0.0, min(100.0, 100.0 * (busy - b0) / (now - t0)))

    def collect(self) -> Iterator[Metric]:
        yield from self._engine()
        yield self._resets()
        yield from self._histograms()
        yield self._cache_config()
        if self.server.config.gpu_telemetry:
            yield from self._dcgm()

    def _engine(self) -> Iterator[Metric]:
        """Queue gauges and token/request counters under vLLM's names."""
        engine = self.server.engine
        st = engine.stats
        model = self.server.config.model
        yield _gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            model,
            engine.num_running,
        )
        yield _gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            model,
            engine.num_waiting,
        )
        yield _gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", model, engine.kv_usage()
        )
        for name, doc, value in (
            (
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                st.prefix_queries,
            ),
            (
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                st.prefix_hits,
            ),
            ("vllm:prompt_tokens_cached", "Number of cached prompt tokens.", st.cached_prompt_tokens),
            ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", st.preemptions),
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", st.prompt_tokens),
            ("vllm:generation_tokens", "Number of generation tokens processed.", st.generation_tokens),
        ):
            yield _counter(name, doc, model, value)
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=["engine", "finished_reason", "model_name"],
        )
        for reason, n in st.finished.items():
            success.add_metric(["0", reason, model], n)
        yield success
        if engine.params.kind == "gpu" and engine.params.num_speculative_tokens:
            yield _counter(
                "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", model, st.spec_drafts
            )
            yield _counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", model, st.spec_draft_tokens
            )
            yield _counter(
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                model,
                st.spec_accepted_tokens,
            )

    def _resets(self) -> Metric:
        # vLLM keeps no such counter: the simulator's own name, so a test can see that a reset arrived
        resets = self.server.engine.stats.prefix_cache_resets
        return _counter(
            "ramp_sim:prefix_cache_resets", "Prefix-cache resets received.", self.server.config.model, resets
        )

    def _histograms(self) -> Iterator[Metric]:
        st = self.server.engine.stats
        model = self.server.config.model
        # the fixed-latency engine admits each request as it arrives (queue time 0): its prefill is its TTFT
        prefill = st.ttft if self.server.engine.params.kind == "fixed" else st.prefill
        for name, doc, h in (
            ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", st.ttft),
            ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", st.itl),
            (
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
                st.queue,
            ),
            (
                "vllm:request_prefill_time_seconds",
                "Histogram of time spent in PREFILL phase for request.",
                prefill,
            ),
            ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", st.e2e),
        ):
            m = HistogramMetricFamily(name, doc, labels=_LABELS)
            m.add_metric(["0", model], h.cumulative(), sum_value=h.total)
            yield m

    def _cache_config(self) -> Metric:
        """vLLM's cache config gauge, read from the engine's own KV model (``KVBlocks``): the blocks it
        allocates from are the blocks it reports, so a client's capacity (num_gpu_blocks x block_size) is the
        simulator's. The fixed-latency engine keeps no KV cache: its nominal configuration stands."""
        engine = self.server.engine
        p = engine.params
        blocks = engine.blocks if isinstance(engine, GpuEngine) else None
        num_blocks = blocks.num_blocks if blocks is not None else p.num_blocks
        block_size = blocks.block_size if blocks is not None else p.block_size
        tokens = num_blocks * block_size if blocks is not None else p.kv_capacity_tokens
        max_concurrency = tokens / p.max_model_len if p.max_model_len > 0 else 0.0
        labels = {
            "block_size": str(block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": str(p.enable_prefix_caching),
            "engine": "0",
            "gpu_memory_utilization": str(p.gpu_memory_utilization),
            "kv_cache_max_concurrency": str(round(max_concurrency, 2)),
            "kv_cache_size_tokens": str(tokens),
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(num_blocks),
        }
        info = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(labels)
        )
        info.add_metric(list(labels.values()), 1.0)
        return info

    def _dcgm(self) -> Iterator[Metric]:
        engine = self.server.engine
        p = engine.params
        util = self._util_pct()
        used = p.weights_bytes + engine.kv_used_tokens() * p.kv_bytes_per_token
        if engine.num_running:
            used += p.activation_bytes
        total_mib = p.hbm_bytes / _MIB
        used_mib = min(total_mib, used / _MIB)
        fill = min(1.0, engine.num_running / 64)
        power = p.idle_power_w + (p.max_power_w - p.idle_power_w) * util / 100 * (0.6 + 0.4 * fill)
        labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
        vals = ["0", "GPU-00000000-ramp-0000-0000-simulated000", "nvidia0", p.gpu_name, "ramp-sim"]
        for name, doc, value in (
            ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", used_mib),
            ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", total_mib - used_mib),
            ("DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).", total_mib),
            ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", util),
            ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", power),
        ):
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(vals, round(value, 3))
            yield g


def _gauge(name: str, doc: str, model: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=_LABELS)
    g.add_metric(["0", model], value)
    return g


def _counter(name: str, doc: str, model: str, value: float) -> CounterMetricFamily:
    c = CounterMetricFamily(name, doc, labels=_LABELS)
    c.add_metric(["0", model], value)
    return c


def make_registry(server: SimServer) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SimCollector(server))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total: what the speed benchmark reads
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
