"""The telemetry hub's windows, fed by hand: rates, resets and histogram deltas over a step, what is shown
now, the run's conditions, which source wins a panel, and an NVML capture replayed through the hub."""

from __future__ import annotations

import csv
import sys

import pytest
from telemetry_fakes import (
    DCGM_TEXT,
    H200,
    FakeNVML,
    FakeSource,
    S,
    server_reading,
    sglang_exposition,
    spec_page,
    vllm_text,
)

from loadgen.snapshot import GPUSample
from loadgen.telemetry import (
    CONDITION_KEYS,
    WINDOW_KEYS,
    NVMLSource,
    Reading,
    TelemetryHub,
    parse_exposition,
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
