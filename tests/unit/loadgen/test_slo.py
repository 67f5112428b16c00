"""SLO verdicts and the choice of the best step."""

from __future__ import annotations

from loadgen.slo import best_step, evaluate
from loadgen.snapshot import SLO, HistogramView, Percentiles, SLOVerdict, StepSummary, WindowStats


def window(
    ok: int = 100,
    errors: dict[str, int] | None = None,
    ttft: tuple[float, float, float] | None = (100.0, 200.0, 300.0),  # p50, p95, p99 ms
    decode_p50: float | None = 50.0,
    itl_p99: float | None = 30.0,
    e2e_p95_ms: float | None = 4000.0,
    out_tok_s: float | None = 1000.0,
) -> WindowStats:
    hist = {}
    if ttft is not None:
        hist["ttft_ms"] = HistogramView(
            "ttft_ms", "ms", Percentiles(count=ok, p50=ttft[0], p95=ttft[1], p99=ttft[2])
        )
    if decode_p50 is not None:
        hist["decode_tok_s"] = HistogramView("decode_tok_s", "tok/s", Percentiles(count=ok, p50=decode_p50))
    if itl_p99 is not None:
        hist["itl_ms"] = HistogramView("itl_ms", "ms", Percentiles(count=ok, p99=itl_p99))
    if e2e_p95_ms is not None:
        hist["e2e_ms"] = HistogramView("e2e_ms", "ms", Percentiles(count=ok, p95=e2e_p95_ms))
    return WindowStats(
        window="step", duration_s=10.0, ok=ok, errors=errors or {}, out_tok_s=out_tok_s, hist=hist
    )


def test_no_slo_means_no_verdict() -> None:
    assert evaluate(SLO(), window()) == SLOVerdict(met=None)


def test_all_objectives_met() -> None:
    slo = SLO(
        ttft_p95_ms=500, ttft_p99_ms=300, decode_p50_tok_s=40, itl_p99_ms=50, e2e_p95_s=5, max_error_rate=0.01
    )
    assert evaluate(slo, window()) == SLOVerdict(met=True)


def test_each_broken_objective_is_listed() -> None:
    slo = SLO(
        ttft_p95_ms=500,
        ttft_p99_ms=900,
        decode_p50_tok_s=40,
        itl_p99_ms=25,
        e2e_p95_s=2.5,
        max_error_rate=0.01,
    )
    stats = window(ok=98, errors={"http_429": 2}, ttft=(400.0, 812.0, 1234.5), decode_p50=31.2, itl_p99=27.4)
    verdict = evaluate(slo, stats)
    assert verdict.met is False
    assert verdict.failures == (
        "TTFT p95 812 ms > 500 ms",
        "TTFT p99 1,234 ms > 900 ms",
        "decode p50 31.2 tok/s < 40 tok/s",
        "ITL p99 27.4 ms > 25 ms",
        "e2e p95 4 s > 2.5 s",
        "error rate 2 % > 1 %",
    )


def test_limit_itself_passes() -> None:
    assert evaluate(SLO(ttft_p95_ms=200.0), window()).met is True
    assert evaluate(SLO(decode_p50_tok_s=50.0), window()).met is True


def test_missing_figure_fails_the_objective() -> None:
    verdict = evaluate(SLO(decode_p50_tok_s=40), window(decode_p50=None))
    assert verdict.met is False and verdict.failures[0].startswith("decode p50 n/a")


def test_not_enough_data() -> None:
    verdict = evaluate(SLO(ttft_p95_ms=500), window(ok=3), min_requests=10)
    assert verdict.met is None
    assert verdict.failures and "not enough data" in verdict.failures[0]
    assert evaluate(SLO(ttft_p95_ms=500), window(ok=0, ttft=None)).met is None


def test_only_errors() -> None:
    stats = window(ok=0, errors={"connect": 5}, ttft=None, decode_p50=None)
    assert evaluate(SLO(ttft_p95_ms=500), stats).met is False
    verdict = evaluate(SLO(max_error_rate=0.5), stats)
    assert verdict.failures == ("error rate 100 % > 50 %",)


def step(
    index: int, level: int, out: float | None, met: bool | None, failures: tuple[str, ...] = (), **kw
) -> StepSummary:
    return StepSummary(
        index=index,
        mode=kw.get("mode", "closed"),
        level=level,
        rate_rps=kw.get("rate"),
        arrival="closed",
        warmup_s=1.0,
        window_s=10.0,
        duration_s=11.0,
        stats=window(out_tok_s=out),
        verdict=SLOVerdict(met, failures),
        client_bound=False,
    )


def test_best_step_is_the_fastest_that_met_the_slo() -> None:
    steps = [
        step(0, 1, 100.0, True),
        step(1, 2, 190.0, True),
        step(2, 4, 350.0, True),
        step(3, 8, 500.0, False, ("TTFT p95 812 ms > 500 ms",)),
    ]
    assert best_step(steps) == 2


def test_best_step_without_slo_and_with_too_little_data() -> None:
    steps = [step(0, 1, 100.0, None), step(1, 2, 200.0, None)]
    assert best_step(steps) == 1
    # a step judged "not enough data" does not count as met
    steps.append(step(2, 4, 900.0, None, ("not enough data: 0 requests finished, need 1",)))
    assert best_step(steps) == 1


def test_best_step_ties_go_to_the_lower_load() -> None:
    steps = [step(0, 16, 1000.0, True), step(1, 8, 1000.0, True), step(2, 32, 1000.0, True)]
    assert best_step(steps) == 1
    open_steps = [
        step(0, 0, 500.0, True, mode="open", rate=4.0),
        step(1, 0, 500.0, True, mode="open", rate=2.0),
    ]
    assert best_step(open_steps) == 1


def test_best_step_none() -> None:
    assert best_step([]) is None
    assert best_step([step(0, 1, 100.0, False, ("x",))]) is None
    assert best_step([step(0, 1, None, True)]) is None
