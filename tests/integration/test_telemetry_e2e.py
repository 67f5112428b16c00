"""Telemetry end to end: the engine ramps the simulator (vLLM-named /metrics, DCGM GPU metrics) with its
telemetry on, and the live server panel data and the record's per-step server columns agree with what the
client measured in the same windows. Every wait is on a snapshot condition with a deadline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch

from loadgen.config import RampPlan
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.types import Target

PROFILE = """
name = "telemetry-e2e"
[[bucket]]
input = 200
output = 48
[sampling]
ignore_eos = true
"""


# 4 sequences at most: 8 streams queue, so "waiting" must show in the step where it happens.
pytestmark = pytest.mark.sim("h200-llama8b", seed=11, max_num_seqs=4)


def test_a_ramp_with_telemetry_fills_the_panel_and_the_record(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    config = RunConfig(
        Target(sim.url),
        parse_profile(PROFILE, source="<telemetry-e2e>"),
        plan=RampPlan((2, 8), step_s=4.0, warmup_s=0.5),
        out=str(out),
    )
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        live = watch.until(
            lambda s: (
                s.server is not None
                and s.server.running is not None
                and s.server.running > 0
                and s.server.step_ttft_ms_p50 is not None
            ),
            30.0,
            "the server panel showing running requests and its TTFT for this step",
        )
        assert live.server is not None and live.server.sources.get("metrics") == "ok"
        assert live.server.runtime == "ramp-sim" and live.server.kv_cache_usage is not None
        assert live.server.gpus and live.server.gpus[0].mem_used_mib is not None  # DCGM names on the page
        # The server's TTFT for this step sits beside the client's: it cannot exceed it by more than a bucket.
        client = live.windows["step"].pct("ttft_ms").p95
        assert client is not None and live.server.step_ttft_ms_p50 <= client * 1.5 + 5  # type: ignore[operator]
        outcome = engine.wait(60.0)
    finally:
        if not engine.done:
            engine.stop(cancel=True)
            engine.wait(30.0)
    assert outcome is not None and outcome.state == "finished"
    rec = read_record(out)
    cond = rec.header["server_conditions"]
    assert rec.header["runtime"] == "ramp-sim" and cond["gpu_name"] and cond["gpu_count"] == 1
    two, eight = rec.steps
    for step in (two, eight):
        srv = step["server"]
        print(
            f"level {step['level']}: out {step['out_tok_s']:.0f} tok/s, server {srv['gen_tok_s']:.0f}; span "
            f"{srv['server_span_s']:.3f} s for a {step['window_s']:.3f} s window, edges {srv['server_edge_s']:.3f} s"
        )
        assert step["errors"] == {} and step["ok"] > 0
        # Sampled at the window's edges (the engine pokes the hub at each boundary; the sim answers at once)
        assert srv["server_edge_s"] is not None and srv["server_edge_s"] < 0.3  # measured: 0.01 s
        assert srv["server_span_s"] == pytest.approx(step["window_s"], abs=2 * srv["server_edge_s"] + 0.05)
        # Same window, same tokens: what the client counted arriving is what the server says it generated.
        assert step["out_tok_s"] == pytest.approx(
            srv["gen_tok_s"], rel=0.05 + 2 * srv["server_edge_s"] / step["window_s"]
        )
        assert srv["server_ttft_p50_ms"] is not None and srv["kv_usage_max"] is not None
        assert srv["gpu_mem_used_max_mib"] is not None and srv["power_mean_w"] is not None
    # 2 streams: at most one waiting a step for admission (a scrape can land there); 8 on 4 slots: ~4 wait.
    assert two["server"]["waiting_max"] <= 1 and two["server"]["running_max"] <= 2
    assert eight["server"]["running_max"] <= 4 and eight["server"]["waiting_max"] >= 2
    # The server's TTFT (from its engine's arrival) cannot exceed what the client saw by more than a
    # histogram bucket's width.
    assert eight["server"]["server_ttft_p50_ms"] <= eight["pct"]["ttft_ms"]["p50"] * 1.5 + 5


def test_a_profile_that_overflows_the_servers_context_is_warned_before_the_load(tmp_path: Path) -> None:
    """The server serves 1,024 tokens; the profile asks up to 1,220: the engine says so before the load
    starts (snapshot, record), and the requests the server then rejects are counted as errors."""
    handle = run_sim_in_thread(build_config("h200-llama8b", seed=3, max_model_len=1024))
    profile = parse_profile(
        """
name = "too-long"
[[bucket]]
input = { min = 200, max = 1200 }
output = 20
[sampling]
ignore_eos = true
""",
        source="<too-long>",
    )
    out = tmp_path / "run.jsonl"
    try:
        config = RunConfig(
            Target(handle.url),
            profile,
            plan=RampPlan((4,), step_s=3.0, warmup_s=0.0),
            out=str(out),
            telemetry=False,
        )
        watch = Watch()
        engine = Engine(config, on_snapshot=watch)
        engine.start()
        snap = watch.until(lambda s: bool(s.warnings), 30.0, "the context warning")
        outcome = engine.wait(60.0)
    finally:
        handle.stop()
    (warning,) = snap.warnings
    # inputs uniform on 200..1,200 + 20 out: those above 1,004 overflow, about 196/1,001 = 19.6 %
    assert (
        "profile 'too-long' asks up to 1,220 tokens" in warning  # the real maximum: 1,200 in + 20 out
        and "max_model_len 1,024" in warning
        and "about 19." in warning
    )
    assert outcome is not None
    rec = read_record(out)
    assert [e["note"] for e in rec.events if e["kind"] == "warning"] == [warning]
    (step,) = rec.steps
    rejected = step["errors"].get("http_status", 0)
    total = rejected + step["ok"]
    # about 100 requests: the rejected share is 19.6 % +- 4 % (one sigma)
    assert total >= 40 and 0.05 < rejected / total < 0.4, (step["errors"], step["ok"])
