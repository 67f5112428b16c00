"""The limit's diagnosis on constructed steps: each kind from the evidence that defines it, ``unknown`` for
conflicting evidence and for bad input, and what it says without server telemetry."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import pytest

from loadgen.analysis.diagnosis import KINDS, NO_TELEMETRY, StepFigures, diagnose, diagnosis_line

BASE = StepFigures(
    level=1,
    ok=40,
    errors=0,
    rate_limited=0,
    out_tok_s=100.0,
    ttft_p50_ms=20.0,
    ttft_p95_ms=25.0,
    decode_p50_tok_s=100.0,
    client_bound=False,
    bound_reason="",
    server={
        "running_max": 1.0,
        "waiting_max": 0.0,
        "kv_usage_max": 0.05,
        "preemptions": 0.0,
        "server_itl_p50_ms": 10.0,
    },
    split={},
)


def split(client: float, server: float, queue: float, prefill: float) -> dict[str, object]:
    return {
        "client": {"n": 40, "mean_ms": client},
        "server": {"n": 40, "mean_ms": server},
        "queue": {"n": 40, "mean_ms": queue},
        "prefill": {"n": 40, "mean_ms": prefill},
        "outside": {"mean_ms": client - server},
    }


BASE = replace(BASE, split=split(21.0, 19.0, 1.0, 18.0))


def step(level: int, server: Mapping[str, float | None] | None = None, **kw: object) -> StepFigures:
    figures = replace(BASE, level=level, **{"out_tok_s": 100.0 * level, **kw})  # type: ignore[arg-type]
    return replace(figures, server={**BASE.server, "running_max": float(level), **(server or {})})


def kind(now: StepFigures, before: tuple[StepFigures, ...] = (BASE,)) -> str:
    d = diagnose(now, before)
    assert set(d) == {"kind", "confidence", "evidence", "first_checks"}
    assert d["kind"] in KINDS and d["confidence"] in ("high", "medium", "low")
    assert d["evidence"] and d["first_checks"]
    return str(d["kind"])


def test_still_scaling_is_none() -> None:
    d = diagnose(step(8, ttft_p50_ms=22.0, decode_p50_tok_s=95.0), (BASE,))
    assert d["kind"] == "none" and d["confidence"] == "high"


def test_a_queue_while_decode_holds_is_queueing() -> None:
    now = step(
        32, {"waiting_max": 12.0, "running_max": 8.0}, ttft_p50_ms=90.0, ttft_p95_ms=100.0, out_tok_s=800.0
    )
    now = replace(now, split=split(91.0, 89.0, 70.0, 19.0))
    d = diagnose(now, (BASE, step(8, ttft_p95_ms=26.0)))
    assert d["kind"] == "queueing"
    assert "12 waiting" in d["evidence"] and "TTFT p95 ×4 since 8 streams" in d["evidence"]
    assert "decode flat" in d["evidence"]
    assert diagnosis_line(d).startswith("Limit: queueing — 12 waiting, ")
    assert "· check max-num-seqs" in diagnosis_line(d)


def test_a_full_kv_cache_or_preemptions_is_kv_cache_and_explains_its_queue() -> None:
    full = step(16, {"kv_usage_max": 0.99, "preemptions": 4.0, "waiting_max": 6.0}, ttft_p50_ms=300.0)
    full = replace(full, split=split(301.0, 299.0, 280.0, 19.0))
    d = diagnose(full, (BASE,))
    assert d["kind"] == "kv_cache" and "4 preemptions" in d["evidence"] and "6 waiting" in d["evidence"]
    assert kind(step(16, {"kv_usage_max": 0.5, "preemptions": 2.0})) == "kv_cache"
    # waiting beside a cache 90 % full: they wait for KV room, not a batch slot
    nearly = replace(
        step(16, {"kv_usage_max": 0.9, "waiting_max": 4.0}), split=split(301.0, 299.0, 280.0, 19.0)
    )
    d = diagnose(nearly, (BASE,))
    assert d["kind"] == "kv_cache" and "KV cache 90% full" in d["evidence"] and "4 waiting" in d["evidence"]


def test_decode_per_stream_falling_without_a_queue_is_decode_bound() -> None:
    now = step(16, ttft_p50_ms=60.0, decode_p50_tok_s=40.0, out_tok_s=16 * 40.0)
    now = replace(now, split=split(61.0, 59.0, 5.0, 54.0), server={**now.server, "server_itl_p50_ms": 25.0})
    assert kind(now) == "decode_bound"


def test_decode_slowing_while_tok_s_still_grows_is_none_not_decode_bound() -> None:
    """bench_diagnosis's none scenario at 32 streams: the h200 engine decodes each stream at 74 % of its
    one-stream speed and tok/s grows in step (74 % a stream: 23.7 streams' worth at 32), TTFT flat. The batch's
    normal cost, not a limit: decode_bound needs tok/s to flatten too (read decode_bound before, 1 step in
    108 of the confusion matrix, 2 of 18 in a rerun)."""
    now = step(32, ttft_p50_ms=22.0, decode_p50_tok_s=74.0, out_tok_s=32 * 74.0)
    now = replace(now, split=split(23.0, 21.0, 1.0, 18.0))
    d = diagnose(now, (BASE,))
    assert d["kind"] == "none", d
    # the same fall with tok/s flattening (55 % a stream) is decode_bound
    flat = replace(now, decode_p50_tok_s=55.0, out_tok_s=32 * 55.0)
    assert diagnose(flat, (BASE,))["kind"] == "decode_bound"


def test_prefill_outlasting_many_decode_steps_while_ttft_grows_is_prefill_bound() -> None:
    now = step(8, ttft_p50_ms=460.0, ttft_p95_ms=600.0, out_tok_s=300.0)
    now = replace(now, split=split(462.0, 450.0, 50.0, 400.0))
    d = diagnose(now, (BASE,))
    assert d["kind"] == "prefill_bound" and any("prefill 89%" in e for e in d["evidence"])


def test_long_prompts_whose_prefills_stall_the_decodes_are_prefill_bound_not_decode_bound() -> None:
    """bench_diagnosis's prefill scenario at 32 streams (800-token prompts, 4x slower prefill) read decode_bound
    in 3 of 3 seeds: the decode steps stall behind the prefills (decode per stream at 2 % of the first
    step's, ITL p50 as long as a prefill), so the prefill no longer outlasted "several decode steps". The
    prompts were long at the first step, on an idle server: that is what says the prefill is the cost."""
    first = replace(
        BASE, split=split(95.0, 92.0, 1.0, 90.0), server={**BASE.server, "server_itl_p50_ms": 6.0}
    )
    now = step(32, ttft_p50_ms=1900.0, ttft_p95_ms=2400.0, decode_p50_tok_s=3.0, out_tok_s=96.0)
    now = replace(
        now, split=split(1905.0, 1890.0, 40.0, 1800.0), server={**now.server, "server_itl_p50_ms": 900.0}
    )
    d = diagnose(now, (first,))
    assert d["kind"] == "prefill_bound", d
    # short prompts at the first step (a prefill of about one decode step): the same fall is decode_bound
    short = replace(first, split=split(9.0, 7.0, 1.0, 6.0))
    assert diagnose(now, (short,))["kind"] == "decode_bound"


def test_ramp_itself_bound_is_client() -> None:
    assert kind(step(8, client_bound=True, bound_reason="worker CPU 98%")) == "client"


def test_a_server_queue_is_named_even_when_ramp_is_bound_too() -> None:
    now = step(32, {"waiting_max": 12.0}, client_bound=True, bound_reason="worker CPU 98%")
    now = replace(now, split=split(91.0, 89.0, 70.0, 19.0))
    d = diagnose(now, (BASE,))
    assert d["kind"] == "queueing" and d["confidence"] == "medium"
    assert any("worker CPU 98%" in e for e in d["evidence"])


def test_time_outside_the_server_dominating_is_network() -> None:
    now = replace(step(4), split=split(220.0, 19.0, 1.0, 18.0))
    assert kind(now) == "network"


def test_outside_time_from_two_different_sets_of_requests_is_not_network() -> None:
    # the client's 40 finished in the window, the server saw 5 first tokens in it: means of different requests
    uneven = split(900.0, 19.0, 1.0, 18.0)
    uneven["server"] = {"n": 5, "mean_ms": 19.0}
    assert kind(replace(step(4), split=uneven)) != "network"


def test_failures_past_five_percent_are_errors() -> None:
    d = diagnose(step(8, ok=80, errors=20, rate_limited=15), (BASE,))
    assert d["kind"] == "errors" and "15 rate limited (HTTP 429)" in d["evidence"]


def test_conflicting_evidence_is_unknown_naming_both() -> None:
    # a deep queue in the server, and most of the client's TTFT outside it: two causes, not one
    now = step(32, {"waiting_max": 12.0})
    now = replace(now, split=split(900.0, 89.0, 70.0, 19.0))
    d = diagnose(now, (BASE,))
    assert d["kind"] == "unknown" and d["confidence"] == "low"
    assert (
        "conflicting" in d["evidence"][0] and "queueing" in d["evidence"][0] and "network" in d["evidence"][0]
    )


def test_latency_growing_with_no_mechanism_showing_is_unknown_not_a_guess() -> None:
    now = step(16, ttft_p50_ms=200.0, out_tok_s=800.0)
    now = replace(now, split=split(201.0, 199.0, 10.0, 20.0))  # prefill short, queue short, no waiting
    d = diagnose(now, (BASE,))
    assert d["kind"] == "unknown" and any("no mechanism" in e for e in d["evidence"])


def test_without_server_telemetry_it_tells_none_client_errors_apart_and_says_what_it_cannot() -> None:
    bare = replace(BASE, server={}, split={})
    scaling = replace(step(8), server={}, split={})
    d = diagnose(scaling, (bare,))
    assert d["kind"] == "none" and NO_TELEMETRY in d["evidence"]
    assert kind(replace(scaling, client_bound=True), (bare,)) == "client"
    assert kind(replace(scaling, errors=10), (bare,)) == "errors"
    growing = replace(scaling, ttft_p50_ms=300.0, out_tok_s=200.0)
    d = diagnose(growing, (bare,))
    assert d["kind"] == "unknown" and any(NO_TELEMETRY in e for e in d["evidence"])


@pytest.mark.parametrize(
    ("now", "why"),
    [
        (step(8, ok=3), "too few requests"),
        (step(8, {"running_max": 40.0}), "reports 40 running at level 8"),
    ],
)
def test_bad_input_is_unknown_with_the_reason(now: StepFigures, why: str) -> None:
    d = diagnose(now, (BASE,))
    assert d["kind"] == "unknown" and why in d["evidence"][0]


def test_nan_and_missing_figures_never_raise() -> None:
    now = step(8, {"waiting_max": math.nan, "kv_usage_max": None}, ttft_p50_ms=None, decode_p50_tok_s=None)
    now = replace(now, split={"server": {"mean_ms": "x"}, "outside": []})
    assert kind(now) in KINDS
    assert diagnosis_line({}) == "" and diagnosis_line({"kind": "none", "evidence": []}) == "Limit: none yet"
