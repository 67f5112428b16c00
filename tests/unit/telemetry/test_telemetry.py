"""Telemetry parsers and the arithmetic on readings, against real captures (vLLM 0.32.0, nvidia-smi on an
H200) and against expositions built from the metric names SGLang and the DCGM exporter define."""

from __future__ import annotations

import pytest
from telemetry_fakes import DCGM_TEXT, H200, sglang_exposition, vllm_text

from loadgen.snapshot import GPUSample
from loadgen.telemetry import (
    CumulativeHistogram,
    SourceError,
    histogram_quantile,
    parse_exposition,
    parse_query_csv,
)
from loadgen.telemetry.nvidia_smi import columns_from_command
from loadgen.telemetry.reading import counter_delta, histogram_delta

# The columns the h200 captures were taken with (see tests/fixtures/README of the shared captures).
H200_QUERY = (
    "nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,memory.free,utilization.gpu,"
    "utilization.memory,power.draw,power.limit,temperature.gpu,clocks.sm,pci.bus_id --format=csv,noheader,nounits"
)


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
    assert set(r.histograms) == {"ttft_s", "itl_s", "queue_s", "prefill_s", "e2e_s"}
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
