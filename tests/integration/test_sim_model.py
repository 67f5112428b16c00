"""The simulator's engine model on a fake clock, its presets, tokenizer and config."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadgen.sim import build_config, run_closed_loop, tokenizer
from loadgen.sim.config import SimConfig
from loadgen.sim.fixed import FixedLatencyEngine
from loadgen.sim.model import GpuEngine
from loadgen.sim.presets import (
    H200_DECODE_STEPS_MS,
    H200_KV_BYTES_PER_TOKEN,
    H200_PREFILL_MS,
    H200_WEIGHTS_BYTES,
)
from loadgen.sim.sequences import Seq

FIX = Path(__file__).parents[1] / "fixtures" / "h200-llama8b-steps"


def _drain(engine: GpuEngine | FixedLatencyEngine, now: int = 0, max_steps: int = 100_000) -> int:
    for _ in range(max_steps):
        if not engine.has_work():
            return now
        now = engine.step(now).end_ns
    raise AssertionError("engine did not finish")


def _seq(
    rid: int, prompt: int, out: int, ids: tuple[int, ...] | None = None, arrival: int = 0, bs: int = 16
) -> Seq:
    ids = ids if ids is not None else tuple(10_000 * rid + i for i in range(prompt))
    return Seq(rid, arrival, len(ids), out, block_hashes=tokenizer.block_hashes(ids, bs))


# -- presets grounded in the fixtures ------------------------------------------------------------------
def test_h200_preset_copies_the_fixture_numbers() -> None:
    rows = list(csv.DictReader((FIX / "decode_step_ms.csv").open()))
    assert [(int(r["batch"]), int(r["context"]), float(r["step_ms_graph"])) for r in rows] == list(
        H200_DECODE_STEPS_MS
    )
    pre = list(csv.DictReader((FIX / "prefill_ms.csv").open()))
    assert [(int(r["prompt_tokens"]), float(r["prefill_ms"])) for r in pre] == list(H200_PREFILL_MS)
    meta = json.loads((FIX / "meta.json").read_text())
    assert meta["kv_bytes_per_token"] == H200_KV_BYTES_PER_TOKEN
    assert abs(meta["weights_gb"] * 1e9 - H200_WEIGHTS_BYTES) < 1e7


def test_h200_step_cost_is_within_six_percent_of_every_measured_step() -> None:
    cost = build_config("h200-llama8b").engine.cost
    for batch, ctx, ms in H200_DECODE_STEPS_MS:
        assert cost.step_ms(batch, batch * ctx, 0) == pytest.approx(ms, rel=0.06)
    for tokens, ms in H200_PREFILL_MS:
        assert cost.step_ms(0, 0, tokens) == pytest.approx(ms)


def test_h200_kv_capacity_comes_from_memory() -> None:
    p = build_config("h200-llama8b").engine
    expected = (p.hbm_bytes * 0.9 - p.weights_bytes - p.activation_bytes) // p.kv_bytes_per_token
    assert p.kv_capacity_tokens == expected
    assert 800_000 < p.kv_capacity_tokens < 1_000_000


# -- batching behaviour --------------------------------------------------------------------------------
def test_throughput_rises_then_plateaus_and_per_request_decode_falls() -> None:
    params = build_config("h200-llama8b").engine
    runs = {n: run_closed_loop(params, n, 128, 256, duration_s=20, warmup_s=5) for n in (1, 16, 64, 256, 512)}
    agg = [runs[n].out_tok_s for n in (1, 16, 64, 256)]
    assert agg == sorted(agg) and agg[-1] > 40 * agg[0]
    decode = [runs[n].decode_tok_s_p50 for n in (1, 16, 64, 256)]
    assert all(d is not None for d in decode)
    assert decode == sorted(decode, reverse=True)  # type: ignore[type-var]
    assert runs[1].decode_tok_s_p50 == pytest.approx(1000 / 5.9, rel=0.1)  # the fixture's 176 tok/s, roughly
    # Past max_num_seqs (256) the extra users only queue: same throughput, far longer TTFT.
    assert runs[512].out_tok_s == pytest.approx(runs[256].out_tok_s, rel=0.15)
    assert runs[512].ttft_ms_p50 > 10 * runs[256].ttft_ms_p50  # type: ignore[operator]


def test_requests_queue_when_the_kv_cache_is_full() -> None:
    engine = GpuEngine(build_config("tiny-cpu").engine)  # 4,096 KV tokens, 8 seqs
    for rid in range(8):
        engine.add(_seq(rid, 900, 50))
    now = 0
    for _ in range(6):
        now = engine.step(now).end_ns
    assert engine.num_running == 4  # 4 x 900 tokens fit, the fifth does not
    assert engine.num_waiting == 4
    assert engine.kv_usage() > 0.85
    _drain(engine, now)
    assert engine.stats.finished["length"] == 8


def test_preemption_recomputes_and_still_delivers_every_token() -> None:
    engine = GpuEngine(build_config("tiny-cpu").engine)
    seqs = [_seq(rid, 64, 1200) for rid in range(8)]  # 8 x 1,264 tokens > 4,096
    for s in seqs:
        engine.add(s)
    produced = {s.rid: 0 for s in seqs}
    now = 0
    while engine.has_work():
        step = engine.step(now)
        now = step.end_ns
        for e in step.emits:
            produced[e.seq.rid] += e.tokens
    assert engine.stats.preemptions > 0
    assert sum(s.preemptions for s in seqs) == engine.stats.preemptions
    assert all(n == 1200 for n in produced.values())
    assert engine.kv_usage() == 0.0


def test_prefix_cache_hits_skip_prefill() -> None:
    params = build_config("h200-llama8b").engine
    shared = tuple(range(5000, 5000 + 2048))
    engine = GpuEngine(params)
    first = _seq(1, 0, 4, ids=shared + (1, 2, 3))
    engine.add(first)
    t_end = _drain(engine)
    second = _seq(2, 0, 4, ids=shared + (7, 8, 9), arrival=t_end)
    engine.add(second)
    _drain(engine, t_end)
    assert first.cached_tokens == 0
    assert second.cached_tokens == 2048
    assert engine.stats.prefix_hits == 2048
    ttft_first = first.first_token_ns - first.arrival_ns  # type: ignore[operator]
    ttft_second = second.first_token_ns - second.arrival_ns  # type: ignore[operator]
    assert ttft_second < ttft_first / 3


def test_chunked_prefill_spreads_a_long_prompt_over_steps() -> None:
    engine = GpuEngine(build_config("tiny-cpu").engine)  # 2,048-token budget per step
    engine.add(_seq(1, 1900, 2))
    engine.add(_seq(2, 1000, 2))
    first = engine.step(0)
    assert first.prefill_tokens == 2048  # 1,900 + the first 148 of the second prompt
    assert [e.seq.rid for e in first.emits] == [1]  # only the finished prompt yields a token
    second = engine.step(first.end_ns)
    assert second.prefill_tokens == 852 and second.decode_seqs == 1
    assert {e.seq.rid for e in second.emits} == {1, 2}


def test_spec_decode_emits_several_tokens_per_step_at_the_configured_acceptance() -> None:
    params = build_config(
        "tiny-cpu", num_speculative_tokens=3, spec_acceptance=0.6, max_model_len=2048
    ).engine
    engine = GpuEngine(params, seed=3)
    for rid in range(4):
        engine.add(_seq(rid, 16, 1900))
    counts: list[int] = []
    now = 0
    while engine.has_work():
        step = engine.step(now)
        now = step.end_ns
        counts += [e.tokens for e in step.emits if not e.finished and e.seq.out > 1]
    expected = 1 + 0.6 + 0.6**2 + 0.6**3  # the bonus token + the accepted prefix of the drafts
    assert sum(counts) / len(counts) == pytest.approx(expected, rel=0.05)
    assert max(counts) == 4
    st = engine.stats
    assert st.spec_accepted_tokens / st.spec_draft_tokens == pytest.approx(expected / 3 - 1 / 3, rel=0.05)


def test_without_ignore_eos_outputs_can_stop_early() -> None:
    import random

    from loadgen.sim.sequences import sample_output_len

    params = build_config("tiny-cpu").engine
    rng = random.Random(1)
    lens = [sample_output_len(rng, params, 1000, ignore_eos=False) for _ in range(200)]
    assert min(lens) >= params.min_output_tokens and max(lens) <= 1000 and len(set(lens)) > 50
    assert sample_output_len(rng, params, 1000, ignore_eos=True) == 1000


def test_fixed_engine_keeps_exact_ttft_and_time_per_token() -> None:
    engine = FixedLatencyEngine(build_config("fast").engine)
    seqs = [Seq(i, i * 3_000_000, 10, 20) for i in range(50)]
    for s in seqs:
        engine.add(s)
    _drain(engine)
    for s in seqs:
        assert s.first_token_ns - s.arrival_ns == 50_000_000  # type: ignore[operator]
        assert s.last_token_ns - s.first_token_ns == 19 * 10_000_000  # type: ignore[operator]
        assert s.out == 20 and s.finish_reason == "length"


# -- tokenizer and config ------------------------------------------------------------------------------
def test_tokenizer_is_deterministic_and_output_tokens_count_back() -> None:
    assert tokenizer.encode("Hello, world! 12345") == tokenizer.encode("Hello, world! 12345")
    assert len(tokenizer.encode("Hello, world! 12345")) == 6  # Hello , world ! 123 45
    stream = tokenizer.output_stream(0, 500)
    text = b"".join(stream).decode()
    assert tokenizer.count(text) == 500
    base = len(tokenizer.encode_chat([]))
    assert base == 3
    assert len(tokenizer.encode_chat([("user", "one two three")])) == 3 + 5 + 3


def test_build_config_rejects_bad_settings_and_round_trips() -> None:
    with pytest.raises(ValueError, match="unknown simulator setting 'bogus'"):
        build_config("tiny-cpu", bogus=1)
    with pytest.raises(ValueError, match="unknown simulator preset"):
        build_config("nope")
    with pytest.raises(ValueError, match="does not fit the KV cache"):
        build_config("tiny-cpu", max_model_len=8192)
    cfg = build_config("h200-llama8b", seed=4, error_rate=0.1, fault_stall_s=3.0, speed=2.0)
    assert cfg.faults.error_rate == 0.1 and cfg.faults.stall_s == 3.0 and cfg.engine.speed == 2.0
    assert SimConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
