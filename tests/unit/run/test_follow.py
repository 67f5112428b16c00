"""When a held step says the followed knee moved (``loadgen.run.follow``): a miss decided on its intervals,
by a client that could not have caused it — never a pass, an undecided step, a point value alone, a cut
step or a narrow client-bound miss — with the failing figure's interval as evidence; and where the knee is
searched for again."""

from __future__ import annotations

import dataclasses

from analysis_fakes import plain_reply, stats_of, summary_of

from loadgen.config import SLO
from loadgen.run.follow import evidence_text, moved, refind_bounds, rose
from loadgen.run.search import Search
from loadgen.snapshot import SLOVerdict, StepSummary
from loadgen.stats import Interval

MISSED = SLOVerdict(met=False, failures=("TTFT p95 50 ms > 40 ms",), on_intervals="missed")


def held(slo: SLO, verdict: SLOVerdict = MISSED, **changes: object) -> StepSummary:
    """A held step at 4 streams whose TTFT is 50 ms on every request (p95 48-52 ms on its interval)."""
    stats, _ = stats_of([plain_reply(i) for i in range(200)], slo)
    margins = {"ttft_p95_ms": Interval(50.0, 48.0, 52.0, 16, 200, 15.0, True)}
    return dataclasses.replace(summary_of(stats, verdict, index=6, margins=margins), **changes)


def test_a_miss_on_the_intervals_is_the_knee_moving_with_its_evidence() -> None:
    slo = SLO(ttft_p95_ms=40.0)
    evidence = moved(held(slo), slo, integer=True)
    assert evidence is not None
    assert evidence["level"] == 4.0 and evidence["held_step"] == 7 and evidence["figure"] == "TTFT p95"
    assert evidence["interval"] == [48.0, 52.0] and evidence["limit"] == 40.0 and evidence["past"] == ">"
    assert evidence["failures"] == ["TTFT p95 50 ms > 40 ms"]
    assert evidence_text(evidence, "streams") == (
        "the knee moved: 4 streams now misses (TTFT p95 50 ms, 95 %: 48–52 > 40)"
    )


def test_a_step_that_did_not_decide_a_miss_holds_on() -> None:
    slo = SLO(ttft_p95_ms=40.0)
    for verdict in (
        SLOVerdict(met=True, on_intervals="met"),
        SLOVerdict(met=False, failures=MISSED.failures, on_intervals="undecided"),
        SLOVerdict(met=False, failures=MISSED.failures),  # judged on its point value alone
    ):
        assert moved(held(slo, verdict), slo, integer=True) is None, verdict
    assert moved(held(slo, ended_by="stop"), slo, integer=True) is None  # the run's stop cut it


def test_a_client_bound_miss_moves_the_knee_only_when_a_faster_client_could_not_flip_it() -> None:
    narrow = SLO(ttft_p95_ms=40.0)  # missed by a quarter of the limit: the client could be the cause
    assert moved(held(narrow, client_bound=True), narrow, integer=True) is None
    wide = SLO(ttft_p95_ms=20.0)  # missed by 150 % of it
    assert moved(held(wide, client_bound=True), wide, integer=True) is not None


def test_the_knee_is_searched_for_again_below_the_held_level() -> None:
    assert refind_bounds(20.0, 8.0, integer=True) == (1.0, 20.0)  # closed loop: down to 1 stream
    assert refind_bounds(8.0, 2.0, integer=False) == (2.0, 8.0)  # open loop: the first range's low end
    assert refind_bounds(3.0, 2.0, integer=False) == (1.5, 3.0)  # ... or half the held rate, lower


def test_an_open_loop_search_whose_first_probe_is_its_high_end_goes_on_to_its_low_end() -> None:
    search = Search(1.5, 3.0, integer=False, slo=SLO(ttft_p95_ms=40.0))  # the held 3 req/s missed: re-found
    assert search.probe_result(3.0, False, margin=-0.5, verdict="missed") == 1.5
    assert search.probe_result(1.5, True, margin=0.5, verdict="met") == 2.25  # then bisected


def test_a_probe_above_the_knee_that_meets_on_its_intervals_is_the_knee_moving_up() -> None:
    slo = SLO(ttft_p95_ms=60.0)
    met = SLOVerdict(met=True, on_intervals="met")
    evidence = rose(held(slo, met), slo, integer=True)
    assert evidence is not None and evidence["direction"] == "up" and evidence["probe_step"] == 7
    assert evidence["interval"] == [48.0, 52.0] and evidence["limit"] == 60.0 and evidence["past"] == "≤"
    assert evidence_text(evidence, "streams") == (
        "the knee moved up: 4 streams now meets (TTFT p95 50 ms, 95 %: 48–52 ≤ 60)"
    )
    # a tail open above (too few values to bound it) meets on its largest value, and says so
    tail = {"ttft_p95_ms": Interval(50.0, 48.0, None, 16, 200, 15.0, False, top=55.0)}
    opened = rose(held(slo, met, margins=tail), slo, integer=True)
    assert opened is not None and opened["interval"] == [48.0, None] and opened["largest"] == 55.0
    assert evidence_text(opened, "streams").endswith("(TTFT p95 50 ms, 95 %: ≥48, every value ≤55 ≤ 60)")


def test_a_probe_above_that_missed_did_not_decide_or_was_cut_leaves_the_knee_where_it_is() -> None:
    slo = SLO(ttft_p95_ms=60.0)
    for verdict in (MISSED, SLOVerdict(met=True, on_intervals="undecided"), SLOVerdict(met=True)):
        assert rose(held(slo, verdict), slo, integer=True) is None, verdict
    assert (
        rose(held(slo, SLOVerdict(met=True, on_intervals="met"), ended_by="stop"), slo, integer=True) is None
    )
