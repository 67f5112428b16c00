"""Issue 33's bad input, in the diagnosis: server figures that are not the server's (``StepFigures.doubt``:
telemetry lost, counters gone back, buckets changed) make it ``unknown`` with the doubt, whatever those
figures seem to show; ramp's own limit and failures, read from the client alone, are still named; a
provisional (live) diagnosis says so in its line."""

from __future__ import annotations

from dataclasses import replace

from loadgen.analysis.diagnosis import StepFigures, diagnose, diagnosis_line

LOST = "the server's telemetry stopped answering 7 s before its end"

FIRST = StepFigures(
    level=2,
    ok=40,
    errors=0,
    rate_limited=0,
    out_tok_s=200.0,
    ttft_p50_ms=20.0,
    ttft_p95_ms=25.0,
    decode_p50_tok_s=100.0,
    client_bound=False,
    bound_reason="",
    server={"running_max": 2.0, "waiting_max": 0.0, "kv_usage_max": 0.1},
    split={},
)
# 16 streams with 12 waiting and a full cache: queueing or kv_cache, if these figures were the server's
QUEUED = replace(
    FIRST,
    level=16,
    out_tok_s=800.0,
    ttft_p50_ms=400.0,
    ttft_p95_ms=500.0,
    server={"running_max": 4.0, "waiting_max": 12.0, "kv_usage_max": 0.99, "preemptions": 3.0},
)


def test_the_figures_would_name_a_limit_without_the_doubt() -> None:
    assert diagnose(QUEUED, (FIRST,))["kind"] == "kv_cache"


def test_a_doubt_is_unknown_with_the_doubt_as_its_first_evidence() -> None:
    d = diagnose(replace(QUEUED, doubt=LOST), (FIRST,))
    assert d["kind"] == "unknown" and d["confidence"] == "low"
    evidence = d["evidence"]
    assert isinstance(evidence, list) and evidence[0] == f"{LOST}: its figures over the step are not read"
    assert "TTFT p50 ×20 the first step's" in evidence  # the client's own trend, still said
    assert d["first_checks"] == ["the server's /metrics and its log", "the step again"]


def test_ramp_bound_and_failures_are_still_named_under_a_doubt() -> None:
    restart = "the server's counter gen_tokens went back during the step (a restart?)"
    bound = diagnose(
        replace(QUEUED, doubt=restart, client_bound=True, bound_reason="event loop lag"), (FIRST,)
    )
    assert bound["kind"] == "client" and bound["evidence"] == [
        "ramp itself is the limit: event loop lag",
        f"{restart}: its figures over the step are not read",
    ]
    failed = diagnose(replace(QUEUED, doubt=restart, errors=20), (FIRST,))
    assert failed["kind"] == "errors" and "33.3% of requests failed (20 of 60)" in failed["evidence"][0]  # type: ignore[index]


def test_a_lying_server_and_too_few_requests_come_before_a_doubt() -> None:
    lying = replace(QUEUED, doubt=LOST, server={**QUEUED.server, "running_max": 64.0})
    assert "reports 64 running at level 16" in str(diagnose(lying, (FIRST,))["evidence"])
    few = replace(QUEUED, doubt=LOST, ok=3)
    assert "too few requests in the step (3 < 8)" in str(diagnose(few, (FIRST,))["evidence"])


def test_a_provisional_line_says_so_and_a_finished_one_does_not() -> None:
    d = diagnose(QUEUED, (FIRST,))
    assert diagnosis_line(d).startswith("Limit: kv_cache — KV cache 99% full")
    assert diagnosis_line({**d, "provisional": True}).startswith("Limit so far (provisional): kv_cache — ")
    none = {"kind": "none", "evidence": ["x"], "provisional": True}
    assert diagnosis_line(none) == "Limit so far (provisional): none yet — x"
